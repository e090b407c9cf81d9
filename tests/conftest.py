import sys
from pathlib import Path

import pytest

# the shared helpers (tests/support/: helpers.py, harness/, the stand-ins) import by name
sys.path.insert(0, str(Path(__file__).parent / "support"))

from helpers import make_binarized, run_cli, synthetic_sentences, train_args  # noqa: E402


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A binarized synthetic corpus (600 train / 60 valid sentences) with its sentencepiece model."""
    work = tmp_path_factory.mktemp("tiny_data")
    return make_binarized(work, synthetic_sentences(600, seed=0), synthetic_sentences(60, seed=1))


@pytest.fixture(scope="session")
def plain_checkpoint(tiny_data, tmp_path_factory):
    """checkpoint_last.pt of a plain 3-update CLEAR run on ``tiny_data`` (batch 16), trained once
    for the checkpoint-safety tests, which copy and edit it (never write beside it)."""
    save = tmp_path_factory.mktemp("plain_checkpoint")
    run_cli(train_args(tiny_data, save, max_update=3, batch_size=16))
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory):
    """(checkpoint, data directory) of a tiny trained CLEAR model, shared by the embedding tests."""
    from embedding_helpers import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("embedding_ckpt"))


@pytest.fixture(scope="session")
def hub(ckpt):
    """That checkpoint loaded through the hub interface."""
    import fairseq_clear  # noqa: F401
    from fairseq_clear.models import ClearRobertaModel

    checkpoint, data = ckpt
    return ClearRobertaModel.from_pretrained(checkpoint.parent, checkpoint.name, data)


@pytest.fixture
def plugin_run():
    """The test drives fairseq's trainer or loaders itself, as a fairseq-clear run does: the plugin's
    fixes to fairseq act (fairseq_fixes/scope.py; fairseq-train enters the scope in call_main)."""
    from fairseq_clear.fairseq_fixes import scope

    with scope.entered():
        yield


def pytest_collection_modifyitems(items):
    """Each test carries its tier's marker (its folder): ``pytest -m "not e2e"`` and the like."""
    for item in items:
        tier = item.path.parent.name
        if tier in ("unit", "e2e", "reliability"):
            item.add_marker(tier)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` (make test) pytest-xdist sends the tests of one xdist_group
    (helpers.EXCLUSIVE) to one worker by suffixing their node ids; a pytest whose node ids it
    cannot change would silently run them side by side: stop instead."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    grouped = [item for item in session.items if item.get_closest_marker("xdist_group")]
    if grouped and "@" not in grouped[0].nodeid:
        raise pytest.UsageError(
            f"pytest-xdist's --dist loadgroup cannot group tests with this pytest ({pytest.__version__}): "
            "install the test extra's pytest (pip install -e '.[test]')")
