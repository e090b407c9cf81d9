"""The augmentation options reach the task's views (built from the real task on tiny data)."""



def test_reorder_unequal_is_reachable_from_the_task(tiny_data):
    from harness.runs import build_task

    task, _ = build_task(tiny_data, "--tokens-per-sample", "64", "--augmentations", "reorder", "--reorder-unequal")
    views = task.datasets["train"][3]["contrastive"]
    body = task.load_sentences("train")[3][1:-1]
    for v in views:
        assert sorted(v[1:-1].tolist()) == sorted(body.tolist())
