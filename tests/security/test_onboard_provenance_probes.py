"""Onboarding provenance probes: a tampered ``training_data.onboarded`` list or
``source_metrics`` (what ``onboard`` writes, :mod:`recsys_router.export.provenance`) is
refused with one ArtifactError line naming the field; the untampered onboarded artifact and
artifacts without these fields (plain exports, older artifacts) still load."""

from __future__ import annotations

import json
import shutil

import pytest

from recsys_router.coldstart.probes_input import probe_data
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def onboarded(tmp_path_factory):
    from recsys_router.coldstart.onboard import onboard_artifact
    d = make_synthetic(60, 4, 2, seed=0)
    old = d.subset(llms=d.llm_names[:3])
    root = tmp_path_factory.mktemp("onb")
    export_router(make_router("knn", k=3).fit(old), root / "src", train_data=old,
                  metrics={"test/mu_o": 0.5})
    texts = [str(t) for t in d.texts[:10]]
    probes = probe_data("new", dict.fromkeys(texts, 1.0), dict.fromkeys(texts, 1e-6))
    return onboard_artifact(root / "src", "new", probes, root / "onb")


def _tamper(src, tmp_path, edit):
    d = tmp_path / "art"
    shutil.copytree(src, d)
    man = json.loads((d / "manifest.json").read_text())
    edit(man)
    (d / "manifest.json").write_text(json.dumps(man))
    return d


def _entry(man):
    return man["training_data"]["onboarded"][0]


PROBES = {
    "onboarded_not_list": (lambda m: m["training_data"].update(onboarded={"llm": "new"}),
                           "training_data.onboarded: expected a list"),
    "more_entries_than_llms": (lambda m: m["training_data"].update(
        onboarded=m["training_data"]["onboarded"] * 5), "more than the 4 LLMs"),
    "entry_named_twice": (lambda m: m["training_data"].update(
        onboarded=m["training_data"]["onboarded"] * 2), "named twice"),
    "entry_extra_key": (lambda m: _entry(m).update(__reduce__="os.system"),
                        "undeclared field(s) ['__reduce__']"),
    "entry_missing_key": (lambda m: _entry(m).pop("probes_sha256"),
                          "onboarded[0].probes_sha256: missing field"),
    "llm_not_in_pool": (lambda m: _entry(m).update(llm="ghost"), "not in the artifact's llms"),
    "llm_is_code": (lambda m: _entry(m).update(llm={"module": "os"}),
                    "onboarded[0].llm: expected str"),
    "n_probes_bool": (lambda m: _entry(m).update(n_probes=True),
                      "onboarded[0].n_probes: expected int"),
    "n_probes_zero": (lambda m: _entry(m).update(n_probes=0), "expected 1 to 10,000,000"),
    "n_probes_huge": (lambda m: _entry(m).update(n_probes=10 ** 30), "expected 1 to 10,000,000"),
    "weighted_string": (lambda m: _entry(m).update(weighted="yes"),
                        "onboarded[0].weighted: expected bool"),
    "probes_file_path": (lambda m: _entry(m).update(probes_file="../../etc/passwd"),
                         "probes_file: expected a plain file name"),
    "probes_file_long": (lambda m: _entry(m).update(probes_file="a" * 300),
                         "probes_file: expected a plain file name"),
    "sha_not_hex": (lambda m: _entry(m).update(probes_sha256="z" * 64),
                    "probes_sha256: expected 64 lowercase hex digits"),
    "source_sha_short": (lambda m: _entry(m).update(source_manifest_sha256="ab"),
                         "source_manifest_sha256: expected 64 lowercase hex digits"),
    "range_reversed": (lambda m: _entry(m).update(score_range=[1.0, 0.0]),
                       "onboarded[0].score_range: expected finite"),
    "range_one_number": (lambda m: _entry(m).update(score_range=[0.0]), "expected 2 items"),
    "range_differs_from_manifest": (lambda m: _entry(m).update(score_range=[0, 1e308]),
                                    "onboarded[0].score_range: [0.0, 1e+308] differs from the "
                                    "manifest's score_range [0.0, 1.0]"),
    "default_range_not_0_1": (lambda m: (m.pop("score_range"), _entry(m).update(
        score_range=[0.0, 5.0], score_range_from="default")),
        "score_range: [0.0, 5.0], expected [0.0, 1.0] for score_range_from 'default'"),
    "llm_is_a_fitted_llm": (lambda m: _entry(m).update(llm=m["llms"][0]["name"]),
                            "onboarded[0].llm: 'sim-llm-0' is not an onboarded LLM of the "
                            "router state (llm_info_)"),
    "date_month_13": (lambda m: _entry(m).update(date="2026-13-45T99:99:99Z"),
                      "date: expected YYYY-MM-DDTHH:MM:SSZ, got '2026-13-45T99:99:99Z'"),
    "date_february_30": (lambda m: _entry(m).update(date="2026-02-30T12:00:00Z"),
                         "date: expected YYYY-MM-DDTHH:MM:SSZ"),
    "range_from_unknown": (lambda m: _entry(m).update(score_range_from="os.system"),
                           "score_range_from: 'os.system', expected one of"),
    "date_free_text": (lambda m: _entry(m).update(date="yesterday"),
                       "date: expected YYYY-MM-DDTHH:MM:SSZ"),
    "source_metrics_extra": (lambda m: m["source_metrics"].update(cls="os:system"),
                             "source_metrics: undeclared field(s) ['cls']"),
    "source_metrics_string_metric": (lambda m: m["source_metrics"]["metrics"].update(x="0.5"),
                                     "source_metrics.metrics.x: expected float"),
    "source_metrics_n_llms_zero": (lambda m: m["source_metrics"].update(n_llms=0),
                                   "source_metrics.n_llms: 0, expected 1 to 100,000"),
    "source_metrics_list": (lambda m: m.update(source_metrics=[1, 2]),
                            "source_metrics: expected an object"),
    "source_metrics_note_huge": (lambda m: m["source_metrics"].update(note="x" * 2000),
                                 "source_metrics.note: over 1000 characters"),
    "source_metrics_without_onboarded": (
        lambda m: m["training_data"].pop("onboarded"),
        "source_metrics: present, but training_data.onboarded lists no onboarded LLM"),
    "source_metrics_with_empty_onboarded": (
        lambda m: m["training_data"].update(onboarded=[]),
        "source_metrics: present, but training_data.onboarded lists no onboarded LLM"),
    # the source router had 3 LLMs; 1 onboarded since: a pool of 4
    "source_metrics_n_llms_too_many": (lambda m: m["source_metrics"].update(n_llms=4),
                                       "source_metrics.n_llms: 4 source LLMs plus 1 onboarded, "
                                       "expected 4 (the pool's LLMs)"),
    "source_metrics_n_llms_too_few": (lambda m: m["source_metrics"].update(n_llms=2),
                                      "source_metrics.n_llms: 2 source LLMs plus 1 onboarded, "
                                      "expected 4 (the pool's LLMs)"),
}


@pytest.mark.parametrize("name", sorted(PROBES))
def test_tampered_provenance_refused(name, onboarded, tmp_path):
    edit, message = PROBES[name]
    d = _tamper(onboarded, tmp_path, edit)
    with pytest.raises(ArtifactError) as info:
        load_router(d)
    text = str(info.value)
    assert "\n" not in text and "manifest.json" in text
    assert message in text, text


def test_untampered_and_field_free_artifacts_load(onboarded, tmp_path):
    assert load_router(onboarded).llm_names[-1] == "new"
    # an artifact written before these fields: no onboarded list, no source_metrics
    d = _tamper(onboarded, tmp_path, lambda m: (m.pop("source_metrics"),
                                                m["training_data"].pop("onboarded")))
    assert load_router(d).llm_names[-1] == "new"


def test_onboarded_twice_keeps_source_metrics_consistent(onboarded, tmp_path):
    """A second onboarding carries the first source's metrics (3 LLMs) and appends a second
    entry: 3 + 2 onboarded = the pool of 5, and the artifact loads."""
    from recsys_router.coldstart.onboard import onboard_artifact
    d = make_synthetic(60, 4, 2, seed=0)
    texts = [str(t) for t in d.texts[:10]]
    probes = probe_data("newer", dict.fromkeys(texts, 0.0), dict.fromkeys(texts, 1e-6))
    two = onboard_artifact(onboarded, "newer", probes, tmp_path / "two")
    man = json.loads((two / "manifest.json").read_text())
    assert (man["source_metrics"]["n_llms"], len(man["training_data"]["onboarded"]),
            len(man["llms"])) == (3, 2, 5)
    assert load_router(two).llm_names[-2:] == ["new", "newer"]


def test_state_without_the_onboarded_llms_record_is_refused(onboarded, tmp_path):
    """The manifest says ``new`` was onboarded but the state's ``llm_info_`` (re-hashed)
    no longer records it: the provenance and the state disagree."""
    import hashlib
    d = _tamper(onboarded, tmp_path, lambda m: None)
    doc = json.loads((d / "state.json").read_text())
    assert "new" in doc["state"]["llm_info_"]
    doc["state"]["llm_info_"] = {}
    (d / "state.json").write_text(json.dumps(doc))
    man = json.loads((d / "manifest.json").read_text())
    man["files"]["state.json"] = hashlib.sha256((d / "state.json").read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="onboarded\\[0\\].llm: 'new' is not an onboarded LLM"):
        load_router(d)


def test_default_range_entry_then_a_given_range_loads(tmp_path):
    """An artifact recording no range is onboarded with [0, 1] assumed ("default"), then
    again with ``--score-range 0,2``: the first entry keeps [0, 1], the manifest records
    [0, 2], and the artifact loads."""
    from recsys_router.coldstart.onboard import onboard_artifact
    d = make_synthetic(60, 5, 2, seed=0)
    old = d.subset(llms=d.llm_names[:3])
    export_router(make_router("knn", k=3).fit(old), tmp_path / "src")
    _tamper(tmp_path / "src", tmp_path / "old", lambda m: m.pop("score_range"))  # pre-range
    shutil.rmtree(tmp_path / "src")
    (tmp_path / "old" / "art").rename(tmp_path / "src")
    texts = [str(t) for t in d.texts[:10]]
    probes = probe_data("a", dict.fromkeys(texts, 1.0), dict.fromkeys(texts, 1e-6))
    one = onboard_artifact(tmp_path / "src", "a", probes, tmp_path / "one")
    assert json.loads((one / "manifest.json").read_text()).get("score_range") is None
    probes = probe_data("b", dict.fromkeys(texts, 1.5), dict.fromkeys(texts, 1e-6))
    two = onboard_artifact(one, "b", probes, tmp_path / "two",
                           score_range=((0.0, 2.0), "option"))
    man = json.loads((two / "manifest.json").read_text())
    assert man["score_range"] == [0.0, 2.0]
    assert [(e["score_range"], e["score_range_from"]) for e in man["training_data"]["onboarded"]] \
        == [([0.0, 1.0], "default"), ([0.0, 2.0], "option")]
    assert load_router(two).llm_names[-2:] == ["a", "b"]
