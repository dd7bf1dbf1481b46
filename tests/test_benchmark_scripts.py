"""Every script in benchmarks/ still imports against the current package and parses its command
line (``--help``): a renamed module or a moved function fails here, not the next time someone
records figures. The scripts are timed runs, so the suite does not run them in full."""
import glob
import importlib.util
import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
SCRIPTS = sorted(p for p in glob.glob(os.path.join(ROOT, "benchmarks", "*.py"))
                 if os.path.basename(p) != "common.py")


def test_there_are_benchmark_scripts():
    assert len(SCRIPTS) >= 20


@pytest.mark.parametrize("path", SCRIPTS, ids=os.path.basename)
def test_benchmark_script_imports_and_parses_help(path, monkeypatch, capsys):
    environ = dict(os.environ)
    try:
        _import_and_parse_help(path, monkeypatch, capsys)
    finally:
        # a script that changes os.environ (gpu_codegen.py unsets TRITON_INTERPRET to compile) must
        # not change it for the tests after this one: the interpreted CUDA-kernel tests need it set
        assert dict(os.environ) == environ, f"{os.path.basename(path)} changed os.environ on import or --help"
        os.environ.clear()
        os.environ.update(environ)


def _import_and_parse_help(path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    name = "_benchmark_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)            # __name__ is not "__main__": nothing runs
    assert callable(getattr(module, "main", None)), f"{path} has no main()"
    monkeypatch.setattr(sys, "argv", [path, "--help"])
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"]) if _takes_argv(module.main) else module.main()
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out


def _takes_argv(fn) -> bool:
    import inspect
    return len(inspect.signature(fn).parameters) > 0
