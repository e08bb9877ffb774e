"""Text in and out of the bench commands: size lists, rates, Markdown tables, the JSON document."""

from __future__ import annotations

import argparse
import json


def parse_int_list(text: str, minimum: int = 1) -> list[int]:
    """Comma-separated integers >= ``minimum`` ('' gives none); an argparse ``type``.

    Raises:
        argparse.ArgumentTypeError: a part is not an integer or is below ``minimum``.
    """
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if any(value < minimum for value in values):
        raise argparse.ArgumentTypeError(f"expected integers >= {minimum}, got {text!r}")
    return values


def parse_name_list(text: str, allowed: tuple[str, ...] | list[str]) -> list[str]:
    """Comma-separated names, each one of ``allowed``, at least one; an argparse ``type``.

    Raises:
        argparse.ArgumentTypeError: a name is not allowed, or none is given.
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(allowed))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated names among {', '.join(allowed)}, got {text!r}"
        )
    return names


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json [PATH]``: write ``what`` as JSON to PATH (:func:`write_json`), '-' or no value for
    stdout, the command's table then going to stderr."""
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="PATH",
        help=f"write {what} as JSON to PATH ('-' or no value: stdout; the table then goes to "
        "stderr)",
    )


def settings(args: argparse.Namespace) -> dict:
    """The parsed command-line arguments of a run, for its JSON record."""
    return {key: value for key, value in vars(args).items() if key != "func"}


def format_rate(value: float) -> str:
    """A rate with a k / M / G suffix and 3 significant digits (12.3M)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def format_share(value: float | None) -> str:
    """A background load as a percentage of the CPUs ("37%"), "–" when unknown."""
    return "–" if value is None else f"{100 * value:.0f}%"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain Markdown table (readable in a terminal and pasteable into docs/)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(document: object, path: str) -> None:
    """Write ``document`` as indented JSON to ``path``, or to stdout when ``path`` is '-'."""
    text = json.dumps(document, indent=1, default=str)
    if path == "-":
        print(text, flush=True)
    else:
        with open(path, "w") as handle:
            handle.write(text + "\n")


def fmt(value: float | None, spec: str = ".1f", missing: str = "not reached") -> str:
    """``value`` formatted with ``spec``, or ``missing`` when it is None (a target not reached)."""
    return missing if value is None else format(value, spec)


def command_line(doc: str | None, add_arguments, run, argv: list[str] | None = None) -> int:
    """A benchmark module's ``python -m`` entry point: the first line of its docstring ``doc`` as
    the description, its ``add_arguments(parser)``, then ``run(args)``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
