"""What makes a study's figures readable at a glance: at most five arms a panel, one y axis per measure across
panels, plain log ticks, load labels that never overlap, the plan's points labelled by their GPUs."""

import json

import matplotlib

matplotlib.use("Agg")

from simlab.studies.figures import new_figure, place_labels, plain_log_axis  # noqa: E402
from simlab.studies.plan_report import fleet_label  # noqa: E402
from simlab.studies.sweep_data import read_sweep_folder  # noqa: E402
from simlab.studies.sweep_plots import MAX_ARMS_PER_PANEL, arm_groups  # noqa: E402

NINE = {"no-spec": ("none", "none"), "mtp-1": ("mtp", "fixed"), "dspark-5": ("dspark", "fixed"),
        "threshold": ("dspark", "threshold"), "hw": ("dspark", "hardware_aware"), "async": ("dspark", "async_topk"),
        "goodput": ("dspark", "goodput"), "adaptive": ("dspark", "adaptive"), "oracle": ("dspark", "oracle")}


def _sweep(folder, arms: dict, baseline=None):
    folder.mkdir()
    doc = {"name": "s", "fields": ["workload.concurrency"], "arms": list(arms), "baseline": baseline,
           "arm_kinds": {a: {"method": m, "scheduler": s, "gamma": 5} for a, (m, s) in arms.items()},
           "points": [{"id": "p1", "values": {"workload.concurrency": 1}}], "scenario_sha256": "0" * 64,
           "load": None, "scenario": {"sweep": {}}}
    (folder / "sweep.json").write_text(json.dumps(doc))
    rows = [f"p1,1,{a},,{i + 1.0},{i + 2.0}" for i, a in enumerate(arms)]
    (folder / "sweep.csv").write_text("point,workload.concurrency,arm,error,output_throughput_per_gpu,"
                                      "median_user_tok_s\n" + "\n".join(rows) + "\n")
    return read_sweep_folder(folder)


def test_nine_arms_go_on_panels_of_at_most_five_with_the_baseline_on_each(tmp_path):
    groups = arm_groups(_sweep(tmp_path / "nine", NINE, baseline="mtp-1"))
    assert len(groups) >= 2 and all(len(arms) <= MAX_ARMS_PER_PANEL for _, arms in groups)
    assert {a for _, arms in groups for a in arms} == set(NINE)
    assert all("no-spec" in arms and "mtp-1" in arms for _, arms in groups)
    few = {a: NINE[a] for a in ("no-spec", "mtp-1", "hw")}
    assert arm_groups(_sweep(tmp_path / "three", few)) == [("", list(few))]


def test_log_ticks_are_plain_numbers():
    fig, (ax,) = new_figure(1)
    ax.plot([1, 300], [3, 40])
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    fig.canvas.draw()
    major = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "10" in major and "100" in major and not any("^" in t or "times" in t for t in major)
    minor = [t.get_text() for t in ax.yaxis.get_ticklabels(minor=True) if t.get_text()]
    assert "20" in minor and "5" in minor  # 3 to 40: under a decade and a half, the 2s, 3s and 5s labelled


def test_labels_that_would_overlap_are_left_out():
    fig, (ax,) = new_figure(1)
    ax.plot([0, 100], [0, 100])
    points = [(50.0, 50.0, "8", "k", 1.0), (50.2, 50.1, "16", "k", 1.0), (90.0, 10.0, "32", "k", 1.0)]
    assert place_labels(ax, points) == 2
    assert [t.get_text() for t in ax.texts] == ["8", "32"]


def test_a_deployment_is_labelled_by_its_gpus():
    assert fleet_label({"num_gpus": 2, "gpu": "h100-sxm"}) == "2×H100-SXM"
