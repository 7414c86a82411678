"""Shell completion: ``paperflows completion bash|zsh`` prints a script that completes commands, options,
pipeline slugs, stage names, ``--set`` keys and the choices of enumerated values.

The script asks ``paperflows _complete CWORD WORD...`` (the shell's words and the index of the one being
completed) for the candidates, one per line. That query reads the command line's parser, the registry's
slugs, dvc.yaml's stage names and the params models of the pipelines named: no stage code, no torch.

Bash splits ``--set data.source=mn`` into ``data.source``, ``=``, ``mn``; zsh keeps one word. The query
joins the pieces back into the word the user typed, completes that, and answers relative to the shell's
own current word, so both shells get what they expect.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

# commands whose first positional argument is a pipeline slug (``new`` makes a new one: not completed)
SLUG_COMMANDS = ("run", "stage", "params", "graph", "serve")
SHELLS = ("bash", "zsh")

_BASH = r"""# bash completion for paperflows. Load it with:  source <(paperflows completion bash)
# (or save it as ~/.local/share/bash-completion/completions/paperflows)
_paperflows() {
    local IFS=$'\n' cword=$COMP_CWORD
    local -a words=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
    if [[ ${words[cword]} == "=" ]]; then  # right after key=: readline completes the empty text after "="
        words+=("")
        cword=$((cword + 1))
    fi
    COMPREPLY=($(paperflows _complete "$cword" "${words[@]}" 2>/dev/null))
    local reply
    for reply in "${COMPREPLY[@]}"; do
        if [[ $reply == *[=.,] ]]; then  # a key waiting for its value, a slug list waiting for more
            compopt -o nospace 2>/dev/null
            break
        fi
    done
}
complete -F _paperflows paperflows
"""

_ZSH = r"""#compdef paperflows
# zsh completion for paperflows. Load it with:  source <(paperflows completion zsh)  (after compinit)
# (or save it as _paperflows in a folder of $fpath)
_paperflows() {
    local -a replies open closed
    replies=("${(@f)$(paperflows _complete $((CURRENT - 1)) "${words[@]}" 2>/dev/null)}")
    local reply
    for reply in "${replies[@]}"; do
        [[ -z $reply ]] && continue
        if [[ $reply == *[=.,] ]]; then open+=("$reply"); else closed+=("$reply"); fi
    done
    (( ${#closed} )) && compadd -- "${closed[@]}"
    (( ${#open} )) && compadd -S '' -- "${open[@]}"
    return 0
}
if (( $+functions[compdef] )); then
    compdef _paperflows paperflows
else
    print -u2 "paperflows completion: run 'autoload -Uz compinit && compinit' before loading this script"
fi
"""


def script(shell: str) -> str:
    """The completion script for ``shell`` (``bash`` or ``zsh``)."""
    if shell not in SHELLS:
        raise ValueError(f"no completion script for {shell!r}; shells: {', '.join(SHELLS)}")
    return _BASH if shell == "bash" else _ZSH


def logical_words(cword: int, words: Sequence[str]) -> tuple[list[str], str]:
    """(the words typed, the shell's current word), with bash's ``a``, ``=``, ``b`` joined back into ``a=b``;
    the last word typed is the one being completed (``""`` right after a space)."""
    shell_words = list(words[: cword + 1])
    shell_words += [""] * (cword + 1 - len(shell_words))
    joined: list[str] = []
    glue = False
    for i, word in enumerate(shell_words):
        if word == "=" and i > 1 and joined:
            joined[-1] += "="
            glue = True
        elif glue:
            joined[-1] += word
            glue = False
        else:
            joined.append(word)
    return joined, shell_words[cword]


def complete(cword: int, words: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """The candidates for ``words[cword]`` (``words[0]`` is the program), relative to that shell word."""
    typed, shell_current = logical_words(cword, words)
    current = typed[-1]
    found = _candidates(typed[1:-1], current, parser)
    prefix = current[: len(current) - len(shell_current)] if current.endswith(shell_current) else ""
    return [c[len(prefix) :] for c in found if c.startswith(current) and c.startswith(prefix)]


def complete_command(argv: Sequence[str], parser: argparse.ArgumentParser) -> int:
    """``paperflows _complete CWORD WORD...``: print the candidates one per line."""
    if not argv or not argv[0].isdigit():
        print("paperflows _complete: expected CWORD WORD... (the shell's COMP_CWORD and COMP_WORDS)", file=sys.stderr)
        return 2
    try:
        found = complete(int(argv[0]), argv[1:], parser)
    except Exception as err:  # noqa: BLE001 - a completion never prints a traceback into the prompt
        print(f"paperflows _complete: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    for candidate in found:
        print(candidate)
    return 0


# --------------------------------------------------------------------------------------------------
# what can come next
# --------------------------------------------------------------------------------------------------
def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subcommands there; no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        flag: action for action in parser._actions if action.help != argparse.SUPPRESS for flag in action.option_strings
    }


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]


def _slugs() -> list[str]:
    from paperflows import registry

    return registry.slugs()


def _candidates(done: list[str], current: str, parser: argparse.ArgumentParser) -> list[str]:
    commands = _subcommands(parser)
    if not done:
        if current.startswith("-"):
            return sorted(_options(parser))
        return [name for name in commands if not name.startswith("_")]
    command, args = done[0], done[1:]
    sub = commands.get(command)
    if sub is None:
        return []
    options = _options(sub)
    given, pending = _split_args(args, options)
    if pending == "--set" or current.startswith("--set="):
        head = "--set=" if current.startswith("--set=") else ""
        return [head + key for key in _set_candidates(command, given, current[len(head) :])]
    if pending is not None:  # an option's value that cannot be guessed (--jobs N, --pool NAME, ...)
        return []
    if current.startswith("-"):
        return sorted(options)
    return _positional_candidates(command, sub, given, current)


def _split_args(args: list[str], options: dict[str, argparse.Action]) -> tuple[list[str], str | None]:
    """(the positional arguments among ``args``, the option still waiting for its value or None)."""
    positionals: list[str] = []
    pending = None
    for arg in args:
        if pending is not None:
            pending = None
        elif arg.startswith("-"):
            action = options.get(arg.split("=", 1)[0])
            if action is not None and action.nargs != 0 and "=" not in arg:
                pending = arg
        else:
            positionals.append(arg)
    return positionals, pending


def _positional_candidates(command: str, sub: argparse.ArgumentParser, given: list[str], current: str) -> list[str]:
    positionals = _positionals(sub)
    action = positionals[min(len(given), len(positionals) - 1)] if positionals else None
    if action is None or (len(given) >= len(positionals) and action.nargs not in ("*", "+")):
        return []
    if action.choices:
        return [str(c) for c in action.choices]
    if command not in SLUG_COMMANDS:
        return []
    if command == "stage" and given:
        from paperflows.dvcgen import stages_by_slug
        from paperflows.settings import load_settings

        return stages_by_slug(load_settings().dvc_file).get(given[0], [])
    slugs = _slugs()
    if command == "serve":
        return [s for s in slugs if s not in given]
    if command == "run":
        head, _, _ = current.rpartition(",")
        if head:  # a comma-joined list: complete its next slug
            listed = head.split(",")
            return [f"{head},{s}" for s in slugs if s not in listed]
        return [*slugs, "all"]
    return slugs


def _set_candidates(command: str, given: list[str], current: str) -> list[str]:
    """``--set`` keys of the pipeline(s) named (``key=``), or the choices of the key before ``=``."""
    from paperflows import registry
    from paperflows.paramdoc import choices, field_at, leaf_fields, show_value

    if command not in ("run", "params") or not given:
        return []
    target = given[0]
    several = target == "all" or "," in target
    slugs = _slugs() if target == "all" else [s for s in target.split(",") if s]
    models = {}
    for slug in slugs:
        try:
            models[slug] = registry.params_model(slug)
        except (registry.UnknownPipelineError, registry.PipelineImportError):
            continue
    if "=" in current:  # a value: the choices of an enumerated key
        key = current.split("=", 1)[0]
        slug, _, rest = key.partition(".") if several else (target, "", key)
        info = field_at(models[slug], rest) if slug in models else None
        return [f"{key}={show_value(c)}" for c in choices(info)] if info is not None else []
    keys = []
    for slug, model in models.items():
        prefix = f"{slug}." if several else ""
        keys += [f"{prefix}{key}=" for key, _ in leaf_fields(model)]
    return keys
