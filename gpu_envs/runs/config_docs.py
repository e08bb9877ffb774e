"""The run config's reference table, generated from the schema (``gpu_envs.runs.config``).

Every field of every section with its type, default, rule and the docstring written under it in
the dataclass. ``docs/config.md`` is this module's output (a test checks it is up to date):

    python -m gpu_envs.runs.config_docs > docs/config.md
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing

from gpu_envs.runs import config as schema

#: The sections in the order of a run config file, with the dataclass of each.
SECTIONS = (
    ("", schema.RunConfig),
    ("trainer.", schema.TrainerConfig),
    ("policy.<tag>.", schema.PolicyConfig),
    ("policy.<tag>.model.", schema.ModelConfig),
    ("saving.", schema.SavingConfig),
    ("evaluation.", schema.EvaluationConfig),
    ("opponents.", schema.OpponentsConfig),
)


def field_docstrings(cls: type) -> dict[str, str]:
    """The docstring written under each field of dataclass ``cls``, by field name."""
    definition = ast.parse(inspect.getsource(cls)).body[0]
    assert isinstance(definition, ast.ClassDef)
    body = definition.body
    docs = {}
    for node, after in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _default(spec: dataclasses.Field) -> str:
    if spec.default is not dataclasses.MISSING:
        value = spec.default
    elif spec.default_factory is not dataclasses.MISSING:
        value = spec.default_factory()
        if dataclasses.is_dataclass(value):
            return "(section)"
    else:
        return "required"
    return "null" if value is None else f"`{value!r}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def fields_table() -> str:
    """The reference page: one table row per field of every section."""
    lines = [
        "# Run config reference",
        "",
        "Every field of a run config (`gpu-envs train --config FILE`, `KEY=VALUE` overrides, "
        "`--print-config`), generated from `gpu_envs.runs.config` by "
        "`python -m gpu_envs.runs.config_docs`. A value breaking its rule is refused with "
        "the field's name.",
        "",
        "Booleans: a boolean field takes true or false, and the spellings YAML and OmegaConf "
        "read as booleans (yes/no, y/n, on/off, 1/0, in any case); any other value, such as "
        "`trainer.progress_bar=-58761`, is refused.",
        "",
        "Seeds: `trainer.seed` and `evaluation.seed` take any int in [0, 2**63 - 1], the range "
        "of the engine's env seeds (gymnasium's `reset(seed=)` takes large ints too), so that "
        "every seed derived from them stays in it: env `i` of rank `r` starts from "
        "`trainer.seed + r * n + i` (`n` the envs of a rank) and evaluation episode `i` from "
        "`evaluation.seed + i`; a seed whose derived seeds would pass 2**63 - 1 is refused "
        "naming the field and its largest value. Torch's generators are seeded with the seed "
        "itself (`trainer.seed + r` on rank `r`: torch takes up to 2**64 - 1); NumPy's and "
        "Python's global generators, which Lightning seeds and NumPy limits to 32 bits, with "
        "`seed % 2**32` (the same as before for seeds below 2**32; the trainer draws nothing "
        "from them).",
        "",
        "Memory: before a run allocates its envs, each process estimates what it will hold (the "
        "env buffers, each policy's rollout buffers and update temporaries for "
        "`trainer.train_batch_size`, the networks with gradients and Adam's state, the "
        "evaluation envs; `gpu_envs.trainers.memory_budget`) and refuses a run that does not fit "
        "in the memory its device has left, naming the fields to lower and both sizes.",
        "",
        "| field | type | default | rule | meaning |",
        "|---|---|---|---|---|",
    ]
    for prefix, cls in SECTIONS:
        docs, hints = field_docstrings(cls), typing.get_type_hints(cls)
        for spec in dataclasses.fields(cls):
            hint = hints[spec.name]
            if dataclasses.is_dataclass(hint) or (
                typing.get_origin(hint) is dict
                and dataclasses.is_dataclass(typing.get_args(hint)[-1])
            ):
                continue  # a section: its own rows follow
            rule = spec.metadata.get("rule")
            lines.append(
                "| "
                + " | ".join(
                    _cell(cell)
                    for cell in (
                        f"`{prefix}{spec.name}`",
                        schema._in_words(hint),
                        _default(spec),
                        f"must be {rule.text}" if rule else "",
                        docs.get(spec.name, ""),
                    )
                )
                + " |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(fields_table(), end="")
