"""The options several ``ctcbench`` commands share, each made in one place: ``--format``,
list options (repeats and comma lists alike) and the run-folder pair ``--out``/``--resume``."""
from __future__ import annotations

import click

from ctcbench.cli_types import OneOf, Path
from ctcbench.settings import list_callback


def format_option(*choices: str):
    """Shared ``--format`` option; the first choice is the default."""
    return click.option("--format", "fmt", type=OneOf(choices), default=choices[0],
                        show_default=True, help="Output for people (table) or machines.")


def list_option(*decls, metavar: str, help: str):
    """An option taking a list of names, repeated or comma-separated alike (``--backend a,b
    --backend c``): ``--backend`` of every command and the datasheet's lists are made here,
    so they read the same way. A value naming nothing (``--backend ""``) is an error."""
    return click.option(*decls, multiple=True, metavar=f"{metavar}[,{metavar}...]",
                        callback=list_callback(str, metavar), help=help)


def case_dirs_option(verb: str):
    """``--cases DIR`` (repeatable): case folders in place of the built-in library."""
    return click.option("--cases", "case_dirs", multiple=True, metavar="DIR",
                        type=Path(file_okay=False), help=f"Folder of .toml/.json case "
                        f"files to {verb} instead of the built-in library.")


def out_options(kind: str, resume_note: str = ""):
    """The run-folder options every driver shares: ``--out DIR`` and ``--resume``."""
    def decorate(fn):
        fn = click.option("--resume", is_flag=True,
                          help=f"Continue the run in --out{resume_note}: finished rows are "
                               f"kept, the rest run. Without it, a folder that already holds "
                               f"a run is refused.")(fn)
        return click.option("--out", type=Path(file_okay=False), default=None,
                            help=f"Run folder; default reports/{kind}-<UTC time>.")(fn)
    return decorate


def function_options(verb: str, *, known_issues: bool = True):
    """``--function PKG.MOD:NAME`` (repeatable), ``--convention``, ``--device`` and
    ``--known-issues``: a user's
    CTC function as a backend (``ctcbench.runtime.functions``), beside ``--backend``."""
    from ctcbench.runtime.devices import DEVICES
    from ctcbench.runtime.functions import CONVENTIONS

    def decorate(fn):
        if known_issues:
            fn = click.option("--known-issues", type=Path(dir_okay=False, exists=True),
                              default=None, metavar="FILE.toml",
                              help="Your known_issues.toml: the failures of a --function it "
                                   "lists (its backend = PKG.MOD:NAME) are known, not "
                                   "failing.")(fn)
        fn = click.option("--device", type=OneOf(DEVICES), default="cpu", show_default=True,
                          help="Where a torch-convention --function runs.")(fn)
        fn = click.option("--convention", type=OneOf(CONVENTIONS), default=None,
                          help="How --function is called: torch (log_probs (T,N,C), targets, "
                               "input_lengths, target_lengths), optax, keras, or numpy "
                               "(returns (loss, grad_logits)) [default: read off its "
                               "parameter names].")(fn)
        return click.option("--function", "functions", multiple=True, metavar="PKG.MOD:NAME",
                            help=f"{verb} your own CTC function as a backend, imported in a "
                                 f"worker process (repeatable; the current folder is on the "
                                 f"path). With no --backend, only the functions.")(fn)
    return decorate


def baseline_options(fn):
    """compare's ``--save-baseline`` and ``--baseline`` (``ctcbench.compare.baseline``; its
    ``--max-change`` is a setting, ``ctcbench.compare.config``)."""
    fn = click.option("--baseline", type=Path(dir_okay=False), default=None,
                      metavar="FILE.json", help="Also fail where a row's numbers moved from "
                      "this --save-baseline file by more than --max-change, even within the "
                      "tolerances.")(fn)
    return click.option("--save-baseline", type=Path(dir_okay=False), default=None,
                        metavar="FILE.json", help="Save every checked row's losses and "
                        "gradient projections to FILE.json, for a later --baseline.")(fn)


def with_functions(backends, functions, convention, device) -> list[str] | None:
    """``backends`` and the names of ``functions`` registered as backends (each probed in its
    worker; what was found is said on stderr); None when neither was given."""
    if not functions:
        return list(backends) if backends else None
    from ctcbench.runtime.functions import add_functions
    said = add_functions(functions, convention=convention, device=device,
                         say=lambda line: click.echo(line, err=True))
    return list(dict.fromkeys([*(backends or ()), *said]))


def one_backend(backend, functions, convention, device) -> tuple[str, str]:
    """The one backend a command takes, ``--backend NAME`` or ``--function PKG.MOD:NAME``:
    its name and the options that name it in a command to reproduce a find."""
    given = bool(backend) + len(functions)
    if given != 1:
        raise click.UsageError(f"--backend: expected one backend (--backend NAME or --function "
                               f"PKG.MOD:NAME), got {given}")
    if backend:
        return backend, f"--backend {backend}"
    name = with_functions((), functions, convention, device)[0]
    return name, f"--function {name}" + (f" --convention {convention}" if convention else "")


def aligner_options(verb: str, *, multiple: bool = True):
    """``--aligner`` (a user's aligner function, or an aligner's name; repeatable where
    ``multiple``) and ``--score``, what a decoder or aligner function's scores are, beside
    ``--decoder`` (``ctcbench.runtime.decoder_functions``)."""
    from ctcbench.runtime.decoders import SCORES
    what = (f"{verb} your own aligner function align(log_probs (T,C), target (L,), *, blank) "
            "-> [path, score], imported in a worker process (the current folder is on the "
            "path), or a registered aligner")

    def decorate(fn):
        fn = click.option("--score", type=OneOf(SCORES), default=None,
                          help="What the scores of a --decoder or --aligner PKG.MOD:NAME are, "
                               "for a function with no 'score' attribute: labelling (log "
                               "P(labels), summed over all its paths), path (its best single "
                               "path's log-prob) or none  [default: labelling for a beam, path "
                               "for greedy and for an aligner]")(fn)
        if multiple:
            return list_option("--aligner", "aligners", metavar="PKG.MOD:NAME",
                               help=f"{what} (repeatable).")(fn)
        return click.option("--aligner", default=None, metavar="PKG.MOD:NAME",
                            help=f"{what}, to fuzz instead.")(fn)
    return decorate
