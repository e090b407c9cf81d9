"""fairseq's own tests, run twice: with torch's allow-list only, then with ``import fairseq_clear``.

Every test that passes in the first run must pass in the second: loading the plugin must not
change fairseq for fairseq's own tasks. Exit status 1 names each test that did not.

    python tests/fairseq_suite/run.py                    # the tests the PyPI sdist can run (CI)
    python tests/fairseq_suite/run.py --fairseq DIR      # all of them, from a fairseq checkout

Where the tests come from (nothing of fairseq is committed here):

* by default, the sdist of the installed fairseq-fixed on PyPI (``pip download``, checked
  against its SHA-256). It holds fairseq's ``tests/test_*.py`` as of facebookresearch/fairseq
  commit 3f0f20f2 (identical to 7409af7f, the last commit to change tests/), but not
  ``tests/utils.py`` and ``tests/distributed/``, which most of the binaries' tests import; the
  files that need them are skipped and listed.
* ``--fairseq DIR``: a checkout of facebookresearch/fairseq (``git clone
  https://github.com/facebookresearch/fairseq && git -C fairseq checkout 3f0f20f2``); its
  ``tests/utils.py`` must be the pinned one (git blob hash checked), and the full list runs,
  fairseq's distributed timeout wrapper tests included.
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SDIST = "fairseq-fixed==0.12.3.1"
SDIST_FILE = "fairseq_fixed-0.12.3.1.tar.gz"
SDIST_SHA256 = "c607577a54ab30e2ee0f0b0a754ea5cdbc6ad0a9f99a1726638a2201445bc1cc"
FAIRSEQ_COMMIT = "3f0f20f2d12403629224347664b3e75c13b2c8e0"
#: git blob hashes of the helpers the sdist lacks, at FAIRSEQ_COMMIT
PINNED_BLOBS = {
    "tests/utils.py": "af3f714ed13ce06faf4426cc83f0b69368a8ac6f",
    "tests/distributed/utils.py": "be4e19cd1e2182903e9dad6b0e52bf33b9968c9d",
    "tests/distributed/test_distributed_timeout_wrapper.py": "996093cb2d73fb3d5a41e65fbac4bd61bf122134",
}

#: fairseq's CPU-runnable tests that exercise what the plugin touches (checkpoints, trainer,
#: data, generation, the binaries of translation, language modelling, masked LM/RoBERTa)
FILES = [
    "test_checkpoint_utils.py", "test_checkpoint_utils_for_task_level_attributes.py", "test_train.py",
    "test_iterators.py", "test_dictionary.py", "test_token_block_dataset.py", "test_noising.py",
    "test_dataset.py", "test_sequence_generator.py", "test_sequence_scorer.py", "test_reproducibility.py",
    "test_binaries.py", "test_valid_subset_checks.py", "test_fp16_optimizer.py", "test_amp_optimizer.py",
    "test_memory_efficient_fp16.py", "test_ema.py", "test_utils.py", "test_data_utils.py", "test_metrics.py",
    "test_roberta.py", "test_lm_context_window.py", "test_inference_dropout.py", "test_label_smoothing.py",
    "test_multi_corpus_dataset.py", "test_concat_dataset.py", "test_resampling_dataset.py",
    "test_backtranslation_dataset.py", "distributed/test_distributed_timeout_wrapper.py",
]
#: modules of fairseq's tests/ that a test file imports (tests.X, .X, from . import X)
_TEST_IMPORTS = re.compile(r"^\s*(?:from\s+(?:tests)?\.(\w+)\s+import|from\s+(?:tests|\.)\s+import\s+(\w+)"
                           r"|import\s+tests\.(\w+))", re.M)
RUNS = (("allow-list only", "plugin_allowlist"), ("with fairseq_clear", "plugin_fairseq_clear"))
#: a test that passes only without the plugin is run this many more times in both ways: a
#: regression passes every time without it and never with it; anything else is flaky
#: (fairseq's test_reproducibility compares losses printed to 3 decimals after a resume,
#: and misses by 0.001-0.01 in about one run of three on this machine, with or without the plugin)
RECHECKS = 3


def git_blob_hash(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sdist_tests(cache: Path) -> Path:
    """fairseq's tests/ from the pinned PyPI sdist, extracted under ``cache``; returns the root."""
    root = cache / f"fairseq-tests-{SDIST_SHA256[:12]}"
    if (root / "tests").is_dir():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / SDIST_FILE
    if not archive.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-build-isolation",
                        "--no-binary", ":all:", SDIST, "-d", str(cache)], check=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        sys.exit(f"error: {archive} has SHA-256 {digest}, not the pinned {SDIST_SHA256}")
    staging = Path(tempfile.mkdtemp(dir=cache))
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and "/tests/" in m.name
                   and m.name.split("/", 1)[1].startswith("tests/") and m.name.endswith(".py")]
        for m in members:
            rel = m.name.split("/", 1)[1]
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            # the sdist's files have CRLF line ends; the commit's have LF
            target.write_bytes(tar.extractfile(m).read().replace(b"\r\n", b"\n"))
    (staging / "tests" / "__init__.py").touch()  # a package, as in fairseq's repository
    staging.rename(root)
    return root


def checkout_tests(fairseq: Path, cache: Path) -> Path:
    """fairseq's tests/ of a checkout, copied under ``cache``; returns the copy's root.

    Copied, not run in place: the checkout's own ``fairseq/`` package would be imported by the
    tests instead of the installed fairseq-fixed, which is the fairseq the plugin runs in."""
    for rel, blob in PINNED_BLOBS.items():
        path = fairseq / rel
        if not path.is_file():
            sys.exit(f"error: --fairseq {fairseq}: no {rel} (a checkout of facebookresearch/fairseq "
                     f"at {FAIRSEQ_COMMIT[:8]} is expected)")
        if git_blob_hash(path) != blob:
            sys.exit(f"error: --fairseq {fairseq}: {rel} is not the one of commit {FAIRSEQ_COMMIT[:8]} "
                     f"(git -C {fairseq} checkout {FAIRSEQ_COMMIT[:8]})")
    root = cache / f"fairseq-checkout-tests-{FAIRSEQ_COMMIT[:12]}"
    if root.exists():
        shutil.rmtree(root)  # our own copy, made anew so that it is the checkout's
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copytree(fairseq / "tests", root / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "gpu", "speech*"))
    return root


def missing_imports(path: Path, seen=None) -> set:
    """Modules of fairseq's tests/ that ``path`` needs, directly or through another test file,
    and that this copy lacks (the sdist has no tests/utils.py)."""
    seen = set() if seen is None else seen
    missing = set()
    for groups in _TEST_IMPORTS.findall(path.read_text(encoding="utf-8")):
        name = next(g for g in groups if g)
        module = path.parent / f"{name}.py"
        if not module.is_file() and not (path.parent / name).is_dir():
            missing.add(f"{path.parent.name}/{name}.py")
        elif module.is_file() and module not in seen:
            seen.add(module)
            missing |= missing_imports(module, seen)
    return missing


def select(root: Path, names) -> tuple:
    """(files to run, [(file, why it is left out)])."""
    run, left_out = [], []
    for name in names:
        path = root / "tests" / name
        missing = missing_imports(path) if path.is_file() else set()
        if not path.is_file():
            left_out.append((name, "not in this copy of fairseq's tests (use --fairseq)"))
        elif missing:
            left_out.append((name, f"needs {', '.join(sorted(missing))}, which this copy lacks (use --fairseq)"))
        else:
            run.append(f"tests/{name}")
    return run, left_out


def outcomes(junit: Path) -> dict:
    """test id -> passed / failed / skipped, from pytest's JUnit XML."""
    result = {}
    for case in ET.parse(junit).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        result[test] = ("failed" if kinds & {"failure", "error"} else
                        "skipped" if "skipped" in kinds else "passed")
    return result


def run_pytest(root: Path, files, plugin: str, junit: Path, extra, quiet: bool = False) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", plugin, "-p", "no:cacheprovider",
                    "--rootdir", str(root), "-o", "addopts=", "-W", "ignore", "--continue-on-collection-errors", f"--junitxml={junit}",
                    *extra, *files], cwd=root, env=env, check=False,
                   stdout=subprocess.DEVNULL if quiet else None, stderr=subprocess.DEVNULL if quiet else None)
    return time.monotonic() - start


def compare(base: dict, other: dict) -> list:
    """Tests that passed without the plugin and did not pass with it."""
    return sorted(t for t, outcome in base.items() if outcome == "passed" and other.get(t) != "passed")


def node_id(root: Path, test: str) -> str:
    """pytest's node id of a JUnit ``classname::name``."""
    classname, name = test.split("::")
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        path = Path(*parts[:i]).with_suffix(".py")
        if (root / path).is_file():
            return "::".join([path.as_posix(), *parts[i:], name])
    return test


def recheck(root: Path, tests, out: Path, times: int = RECHECKS) -> tuple:
    """Run each regressed test again ``times`` times in both ways: (regressions, flaky)."""
    regressions, flaky = [], []
    for test in tests:
        passes = {}
        for _, plugin in RUNS:
            junit = out / f"recheck-{plugin}.xml"
            passes[plugin] = 0
            for _ in range(times):
                run_pytest(root, [node_id(root, test)], plugin, junit, [], quiet=True)
                passes[plugin] += outcomes(junit).get(test) == "passed"
        base_passes, plugin_passes = passes[RUNS[0][1]], passes[RUNS[1][1]]
        (regressions if base_passes == times and plugin_passes == 0 else flaky).append(
            (test, f"passed {base_passes}/{times} without and {plugin_passes}/{times} with the plugin"))
    return regressions, flaky


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fairseq", type=Path, help="a facebookresearch/fairseq checkout at commit "
                        f"{FAIRSEQ_COMMIT[:8]}: runs every listed test (default: the PyPI sdist's)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "fairseq-clear", help="where the sdist and its tests are kept (default: %(default)s)")
    parser.add_argument("--files", nargs="+", default=FILES, help="test files under tests/ (default: the list above)")
    parser.add_argument("--out", type=Path, help="directory for the two JUnit XML files (default: a temporary one)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression for both runs")
    args = parser.parse_args(argv)

    root = checkout_tests(args.fairseq.resolve(), args.cache) if args.fairseq else sdist_tests(args.cache)
    files, left_out = select(root, args.files)
    if not files:
        sys.exit("error: none of the test files can run from this copy of fairseq's tests")
    out = args.out or Path(tempfile.mkdtemp(prefix="fairseq-suite-"))
    out.mkdir(parents=True, exist_ok=True)
    extra = ["-k", args.keyword] if args.keyword else []
    results, seconds = [], []
    for label, plugin in RUNS:
        junit = out / f"{plugin}.xml"
        print(f"== fairseq's tests, {label} ({len(files)} files)", flush=True)
        seconds.append(run_pytest(root, files, plugin, junit, extra))
        results.append(outcomes(junit))
    base, with_plugin = results
    regressed, flaky = recheck(root, compare(base, with_plugin), out)
    counts = [{k: sum(1 for v in r.values() if v == k) for k in ("passed", "failed", "skipped")} for r in results]
    print(f"\nfairseq's tests from {'the checkout ' + str(root) if args.fairseq else 'the PyPI sdist ' + SDIST}")
    for (label, _), count, secs in zip(RUNS, counts, seconds):
        print(f"  {label:20s} passed {count['passed']:4d}  failed {count['failed']:3d}  "
              f"skipped {count['skipped']:3d}  ({secs:.0f} s)")
    for name, why in left_out:
        print(f"  left out: {name}: {why}")
    for test, how in flaky:
        print(f"  flaky, not a regression: {test}: {how}")
    if counts[0]["passed"] == 0:
        print("\nerror: no test passed even with the allow-list only: nothing was compared")
        return 1
    if regressed:
        print(f"\n{len(regressed)} test(s) pass with the allow-list only and not with fairseq_clear imported:")
        for test, how in regressed:
            print(f"  {test}: {how}")
        return 1
    print(f"\nevery one of the {counts[0]['passed']} tests that pass with the allow-list only passes with "
          f"fairseq_clear imported{' (rechecks above aside)' if flaky else ''}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
