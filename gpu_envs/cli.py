"""The ``gpu-envs`` command line: one subcommand per module of ``gpu_envs.commands``.

Each command module defines ``add_parser(subparsers)`` (cheap: no heavy imports) and sets
``func`` on its parser to the function that runs it. A command whose arguments need heavy imports
(numpy, torch, the trainer) sets its parser's ``setup`` instead of adding them at once: ``gpu-envs
--help`` then imports no torch.

The error policy of every command (``guarded``): an expected failure (a full disk, a read-only
folder, a bad value, a bad strategy, not enough memory, an unusable checkpoint) ends with one line
``gpu-envs <command>: error: <cause>; <what to do>`` and exit status 1, without a traceback unless
``--debug`` or ``GPU_ENVS_DEBUG=1``; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import importlib
import os
import re
import signal
import sys
import traceback
from collections.abc import Callable, Sequence

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
    add_debug_flag(parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"gpu_envs.commands.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"gpu_envs.commands.{name}":
                raise
            continue
        module.add_parser(subparsers)
    for command in subparsers.choices.values():  # (also after the command's name)
        add_debug_flag(command)
    return parser


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """``--debug``: an expected failure shows its traceback too (see ``guarded``)."""
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an error, show the traceback too (also: GPU_ENVS_DEBUG=1)",
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gpu-envs``, under the CLI's error policy (``guarded``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    words = [word for word in argv if not word.startswith("-")]
    command = "gpu-envs" + (f" {words[0]}" if words else "")
    return guarded(command, lambda: _run(argv), argv)


def guarded(command: str, function: Callable[[], int], argv: Sequence[str]) -> int:
    """``function()``'s exit status under the CLI's error policy. An expected failure
    (``error_line``) raises ``SystemExit`` with its one line; a command's own one-line
    ``SystemExit`` passes. With ``--debug`` in ``argv`` or ``GPU_ENVS_DEBUG=1`` the traceback of
    either is printed first. Ctrl-C before a command handles it (while torch and the kernels
    load) ends with one line and exit status 130. Once the command has ended, a signal while the
    interpreter shuts down ends the process at once with the same status
    (``_exit_quietly_on_signals``): no traceback from an exit handler."""
    debug = "--debug" in argv or os.environ.get("GPU_ENVS_DEBUG", "") not in ("", "0")
    code: int | str | None = 1
    try:
        code = function()
    except KeyboardInterrupt:
        print("gpu-envs: interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        code = _reader_gone()
    except SystemExit as stop:
        code = stop.code
        if debug and stop.__context__ is not None:
            traceback.print_exception(stop.__context__)
        raise
    except Exception as error:
        line = error_line(command, error)
        if line is None:
            raise
        if debug:
            traceback.print_exc()
        raise SystemExit(line) from error
    finally:
        status = code if isinstance(code, int) else (0 if code is None else 1)
        atexit.register(_exit_quietly_on_signals, status)
    return code


def _reader_gone() -> int:
    """The status of a command whose output's reader left (``gpu-envs ... | head``): 141, as a
    process killed by SIGPIPE, with no traceback. stdout goes to ``os.devnull`` so that the
    interpreter's final flush of it raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


#: ``errno`` values of the failures a user can fix, and what to do about each.
_OS_ERRORS = {
    errno.ENOSPC: "free some space there, or write elsewhere",
    errno.EDQUOT: "free some space there, or write elsewhere",
    errno.EROFS: "that file system is read-only: write elsewhere",
    errno.EACCES: "make it writable for you, or write elsewhere",
    errno.EPERM: "make it writable for you, or write elsewhere",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path",
    errno.EISDIR: "check the path",
    errno.ENAMETOOLONG: "use a shorter path",
}
#: The errors of gpu-envs whose message names the cause and the fix, by module.
_OWN_ERRORS = {
    "gpu_envs.runs.errors": ("ConfigError",),
    "gpu_envs.runs.checkpoint": ("CheckpointError", "RunFolderError"),
    "gpu_envs.trainers.ppo": ("NonFiniteError",),
    "gpu_envs.trainers.fabric_loop": ("RankFailure",),
}


def error_line(command: str, error: BaseException) -> str | None:
    """``<command>: error: <cause>; <what to do>`` of an expected failure, or None (a bug, whose
    traceback stays): an error of gpu-envs that names its fix (``_OWN_ERRORS``), an ``OSError``
    of ``_OS_ERRORS`` (a full disk, a read-only folder, ...), not enough memory, or a bad value
    (``ValueError``, of a game's env or Lightning's strategy say)."""
    train = command == "gpu-envs train"
    own = tuple(  # (a module not imported yet raised none of them)
        getattr(sys.modules[module], name)
        for module, names in _OWN_ERRORS.items()
        if module in sys.modules
        for name in names
    )
    torch = sys.modules.get("torch")
    out_of_memory = (MemoryError,) + ((torch.OutOfMemoryError,) if torch is not None else ())
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, own):
        cause = str(error)
    elif isinstance(error, OSError) and error.errno in _OS_ERRORS:
        where = f": {error.filename}" if error.filename is not None else ""
        cause = f"{error.strerror or text}{where}; {_OS_ERRORS[error.errno]}"
        if cause.endswith("elsewhere"):
            cause += " (saving.basedir=FOLDER)" if train else " (another --out)"
    elif isinstance(error, out_of_memory):
        cause = f"not enough memory ({text}); " + (
            "use fewer envs or smaller batches (trainer.num_envs, trainer.train_batch_size)"
            if train
            else "use fewer envs or episodes"
        )
    elif isinstance(error, ValueError):
        cause = f"{text}; check that value (" + (
            "`gpu-envs train --print-config` shows the run's config, docs/config.md its fields)"
            if train
            else f"`{command} --help` lists the options)"
        )
    else:
        return None
    return f"{command}: error: {cause}"


def _exit_quietly_on_signals(status: int) -> None:
    """While the interpreter shuts down: SIGINT and SIGTERM end the process at once with
    ``status`` (the command's), instead of a ``KeyboardInterrupt`` traceback from an exit
    handler or a death by signal."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # (a closed pipe, a closed stream)
            stream.flush()

    def exit_now(number: int, frame) -> None:
        os._exit(status)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, exit_now)


def _run(argv: list[str]) -> int:
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
