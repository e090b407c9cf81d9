"""Damaged binarized data fails at start-up naming the file (not deep inside torch/fairseq)."""

import shutil

import pytest

from helpers import run_cli, train_args


def _damage(data, kind):
    train = data / "train"
    if kind == "truncated-bin":
        raw = (train.with_suffix(".bin")).read_bytes()
        train.with_suffix(".bin").write_bytes(raw[: len(raw) // 2])
        return train.with_suffix(".bin"), "is truncated"
    if kind == "empty-bin":
        train.with_suffix(".bin").write_bytes(b"")
        return train.with_suffix(".bin"), "holds no sentences"
    if kind == "truncated-idx":
        raw = train.with_suffix(".idx").read_bytes()
        train.with_suffix(".idx").write_bytes(raw[:30])
        return train.with_suffix(".idx"), "is damaged"
    if kind == "missing-idx":
        train.with_suffix(".idx").unlink()
        return train.with_suffix(".idx"), "is missing"
    if kind == "ids-beyond-dictionary":
        # keep the first 40 dictionary rows: every id above them is now out of range
        lines = (data / "dict.txt").read_text(encoding="utf-8").splitlines()
        (data / "dict.txt").write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")
        return train.with_suffix(".bin"), "the split was binarized with another dict.txt"
    if kind == "zero-sentences":
        from fairseq.data import indexed_dataset

        builder = indexed_dataset.make_builder(str(train.with_suffix(".bin")), impl="mmap", vocab_size=1000)
        builder.finalize(str(train.with_suffix(".idx")))
        return train.with_suffix(".bin"), "holds no sentences"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["truncated-bin", "empty-bin", "truncated-idx", "missing-idx",
                                  "ids-beyond-dictionary", "zero-sentences"])
@pytest.mark.parametrize("task", ["clear", "declutr"])
def test_damaged_split_is_named_at_start_up(tiny_data, tmp_path, kind, task):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    path, expected = _damage(data, kind)
    proc = run_cli(train_args(data, tmp_path / "save", "--task", task, max_update=2), check=False)
    assert proc.returncode != 0
    assert "BinarizedDataError" in proc.stdout and expected in proc.stdout and str(path) in proc.stdout, \
        proc.stdout[-2500:]
    assert not (tmp_path / "save" / "checkpoint_last.pt").exists()


def _set_size(idx_path, sentence, size):
    """Overwrite one sentence's size in a fairseq mmap ``.idx`` (int32 sizes follow a 26-byte header)."""
    import struct

    raw = bytearray(idx_path.read_bytes())
    struct.pack_into("<i", raw, 26 + 4 * sentence, size)
    idx_path.write_bytes(bytes(raw))


def _damage_more(data, kind):
    train = data / "train"
    if kind == "negative-size":
        _set_size(train.with_suffix(".idx"), 5, -1)
        return train.with_suffix(".idx"), "sentence 5 has size -1"
    if kind == "oversized-size":
        _set_size(train.with_suffix(".idx"), 7, 10 ** 8)
        return train.with_suffix(".idx"), "sentence 7 (size 100000000"
    lines = (data / "dict.txt").read_text(encoding="utf-8").splitlines()
    if kind == "duplicate-dict-line":
        lines.insert(10, lines[3])
        (data / "dict.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return data / "dict.txt", f"dict.txt:11: '{lines[3].rsplit(' ', 1)[0]}' is listed twice"
    if kind == "dict-line-without-count":
        lines[12] = lines[12].rsplit(" ", 1)[0]
        (data / "dict.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return data / "dict.txt", "dict.txt:13: expected '<token> <count>'"
    if kind == "dict-not-utf8":
        (data / "dict.txt").write_bytes("\n".join(lines[:4]).encode() + b"\n\xff\xfe 3\n" + "\n".join(lines[4:]).encode())
        return data / "dict.txt", "dict.txt:5: not UTF-8"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["negative-size", "oversized-size", "duplicate-dict-line",
                                  "dict-line-without-count", "dict-not-utf8"])
def test_damaged_sentence_or_dictionary_line_is_named(tiny_data, tmp_path, kind):
    """A negative size used to train silently (that sentence read as the rest of train.bin); the
    others failed without the file's name. Each names the file and the sentence or line."""
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    path, expected = _damage_more(data, kind)
    proc = run_cli(train_args(data, tmp_path / "save", "--task", "clear", max_update=2), check=False)
    assert proc.returncode != 0, proc.stdout[-2500:]
    assert expected in proc.stdout and str(path) in proc.stdout, proc.stdout[-2500:]
    assert not (tmp_path / "save" / "checkpoint_last.pt").exists()
