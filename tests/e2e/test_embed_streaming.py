"""clear-embed writes exactly the path given, refuses bad outputs before any work, streams in
constant memory with progress lines; embed() takes device= and precision=; hub.num_truncated is
per thread; a sentencepiece model that does not match dict.txt is refused at load."""

import os
import random
import threading

import numpy as np
import pytest

from helpers import bin_path, make_binarized, run_cli


def _embed_cli(ckpt, *args, check=True):
    checkpoint, data = ckpt
    return run_cli([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--cpu", *args],
                   check=check)


def test_output_is_written_at_exactly_the_given_path(ckpt, hub, tmp_path):
    sentences = ["The cat sees the ball.", "", "A dog reads a story today."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    out = tmp_path / "vectors.bin"
    _embed_cli(ckpt, "--input", tmp_path / "in.txt", "--output", out, "--chunk-size", "2")
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "vectors.bin"]
    np.testing.assert_allclose(np.load(out), hub.embed(sentences), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["directory", "under-a-file"])
def test_bad_output_is_refused_before_loading(ckpt, tmp_path, kind):
    (tmp_path / "in.txt").write_text("a\n", encoding="utf-8")
    if kind == "directory":
        out = tmp_path / "outdir"
        out.mkdir()
        expected = "is a directory"
    else:
        (tmp_path / "afile").write_text("x")
        out = tmp_path / "afile" / "v.npy"
        expected = "is a file, not a directory"
    proc = _embed_cli(ckpt, "--input", tmp_path / "in.txt", "--output", out, check=False)
    assert proc.returncode == 2 and expected in proc.stdout, proc.stdout[-1500:]
    assert "loading" not in proc.stdout.lower() or "dictionary" not in proc.stdout  # nothing was loaded
    assert not (tmp_path / "outdir.npy").exists()


def _peak_rss_mb(ckpt, tmp_path, n):
    lines = tmp_path / f"in{n}.txt"
    rng = random.Random(0)
    words = "the cat dog sees reads a story ball river team".split()
    with open(lines, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) + "\n")
    out = tmp_path / f"v{n}.npy"
    code = (
        "import resource, runpy, sys; sys.argv = sys.argv[1:]; "
        "sys.argv[0] = 'clear-embed'\n"
        "try:\n    runpy.run_path(sys.argv[0] if False else %r, run_name='__main__')\n"
        "finally:\n    print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    ) % bin_path("clear-embed")
    checkpoint, data = ckpt
    proc = run_cli([os.sys.executable, "-c", code, "clear-embed", "--checkpoint", checkpoint, "--data", data,
                    "--cpu", "--input", lines, "--output", out, "--chunk-size", "5000", "--batch-size", "256",
                    "--log-interval", "0"])
    peak = int(proc.stdout.split("PEAK_RSS_KB")[1].split()[0]) / 1024
    assert np.load(out, mmap_mode="r").shape[0] == n
    return peak, proc.stdout


def test_streaming_memory_is_flat_in_the_number_of_lines(ckpt, hub, tmp_path):
    small, _ = _peak_rss_mb(ckpt, tmp_path, 10_000)
    large, log = _peak_rss_mb(ckpt, tmp_path, 200_000)
    print(f"clear-embed peak RSS: {small:.0f} MB for 10,000 lines, {large:.0f} MB for 200,000 lines")
    assert "sentences/s" in log and "embedded: 5000/200000 sentences" in log  # progress lines in a log
    # the whole 200k input as Python strings plus its vectors would add well over 100 MB
    assert large < small * 1.15, (small, large)
    vectors = np.load(tmp_path / "v200000.npy", mmap_mode="r")
    lines = (tmp_path / "in200000.txt").read_text(encoding="utf-8").split("\n")
    picks = [0, 4999, 5000, 123456, 199999]
    np.testing.assert_allclose(vectors[picks], hub.embed([lines[i] for i in picks]), atol=1e-5, rtol=0)


def test_device_and_precision(hub):
    s = ["The cat sees the ball.", "A dog reads a story today in the evening."]
    fp32 = hub.embed(s)
    np.testing.assert_allclose(hub.embed(s, device="cpu"), fp32, atol=1e-6)
    bf16 = hub.embed(s, precision="bf16")
    assert bf16.dtype == np.float32 and 0 < np.abs(bf16 - fp32).max() < 0.05
    for bad, match in [("cuda:7", "device='cuda:7'"), ("tpu", "device='tpu'"), ("nonsense", "device='nonsense'")]:
        with pytest.raises(ValueError, match=match):
            hub.embed(s, device=bad)
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        hub.embed(s, precision="fp16")
    with pytest.raises(ValueError, match="unknown precision"):
        hub.embed(s, precision="int8")


def test_num_truncated_is_per_thread(hub):
    long = " ".join(["our team builds a red house"] * 30)
    results = {}

    def run(name, sentences):
        for _ in range(20):
            hub.embed(sentences)
            results.setdefault(name, set()).add(hub.num_truncated)

    threads = [threading.Thread(target=run, args=("none", ["a cat"] * 4)),
               threading.Thread(target=run, args=("three", [long] * 3 + ["a dog"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"none": {0}, "three": {3}}


def test_a_sentencepiece_model_that_does_not_match_dict_txt_is_refused(ckpt, tmp_path):
    from fairseq_clear.models import ClearRobertaModel
    from fairseq_clear.models.hub_interface import HubLoadError

    checkpoint, data = ckpt
    rng = random.Random(1)
    words = lambda: " ".join("".join(rng.choice("qxzjkvwy") for _ in range(rng.randint(3, 8))) for _ in range(6))  # noqa: E731
    other = make_binarized(tmp_path / "other", [words() for _ in range(300)], [words() for _ in range(10)],
                           vocab_size=120)
    with pytest.raises(HubLoadError, match="do not belong together") as info:
        ClearRobertaModel.from_pretrained(str(checkpoint.parent), checkpoint.name, str(data),
                                          sentencepiece_model=str(other / "sentencepiece.model"))
    assert str(other / "sentencepiece.model") in str(info.value)
    assert str(data / "dict.txt") in str(info.value)
