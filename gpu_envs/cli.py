"""The ``gpu-envs`` command line: one subcommand per module of ``gpu_envs.commands``.

Each command module defines ``add_parser(subparsers)`` (cheap: no heavy imports) and sets
``func`` on its parser to the function that runs it. A command whose arguments need heavy imports
(numpy, torch, the trainer) sets its parser's ``setup`` instead of adding them at once: ``gpu-envs
--help`` then imports no torch.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable

COMMAND_MODULES = ("bench", "device_check", "evaluate", "plot", "render", "train")


_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")


def plain_text(text: str) -> str:
    """Sphinx markup of the docstrings that serve as help texts, as a terminal shows it:
    ``:func:`~a.b.f` `` -> ``f``, ``:mod:`a.b` `` -> ``a.b``, double backquotes dropped."""
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), text)
    return text.replace("``", "")


class PlainHelpParser(argparse.ArgumentParser):
    """An argument parser whose help is plain text (see :func:`plain_text`)."""

    def format_help(self) -> str:
        return plain_text(super().format_help())


class DeferredParser(PlainHelpParser):
    """A subcommand's parser that runs ``setup(parser)`` (which adds the arguments and may import
    heavy modules) only when that subcommand is parsed."""

    setup: Callable[[argparse.ArgumentParser], None] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.setup is not None:
            setup, self.setup = self.setup, None
            setup(self)
        return super().parse_known_args(args, namespace)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every available subcommand."""
    parser = PlainHelpParser(
        prog="gpu-envs", description="Batched RL environments on Numba kernels."
    )
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=DeferredParser
    )
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"gpu_envs.commands.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"gpu_envs.commands.{name}":
                raise
            continue
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gpu-envs``. Ctrl-C before a command handles it (while torch and the
    kernels load) ends with one line and exit status 130."""
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("gpu-envs: interrupted", file=sys.stderr)
        return 130


def _run(argv: list[str] | None) -> int:
    from gpu_envs.engine.first_compile import show_on_stderr

    show_on_stderr()  # "compiling the CPU kernels of ... (first run only ...)"
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    result = args.func(args, extra) if getattr(args, "accepts_extra", False) else args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
