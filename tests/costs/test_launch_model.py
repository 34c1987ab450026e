"""The GEMM launch-count classifier: its features, its stored trees, and the shipped H200 profile's answers."""

import math

import pytest

from kernelcast.costs.launch_table import GEMM_FEATURES, LaunchTable, gemm_features
from kernelcast.costs.tree_model import LEAF, Tree, TreeClassifier
from kernelcast.profiles import load_profile


def test_gemm_features_of_a_small_fp32_head():
    # the optimizer zoo's classifier head: addmm(bias, x[512, 256], W[10, 256].t())
    x = dict(zip(GEMM_FEATURES, gemm_features("float32", False, True, True, 512, 10, 256)))
    assert len(x) == len(GEMM_FEATURES)
    assert x["dtype=float32"] == 1.0 and x["dtype=bfloat16"] == 0.0
    assert (x["a_transposed"], x["b_transposed"], x["bias"]) == (0.0, 1.0, 1.0)
    assert (x["log2 M"], x["log2 K"]) == (9.0, 8.0)
    assert x["log2 N"] == pytest.approx(math.log2(10))
    assert x["log2 K/(M*N)"] == pytest.approx(8 - 9 - math.log2(10))
    # N = 10 fp32: the output's leading dimension is 40 bytes, a multiple of 8, not of 16
    assert (x["log2 alignment bytes"], x["aligned 16 bytes"]) == (3.0, 0.0)


def test_tree_classifier_follows_left_on_less_or_equal():
    # one split on feature 0 at 2.0: x <= 2 scores class 1 up, x > 2 class 2
    up = Tree(feature=(0, LEAF, LEAF), threshold=(2.0, 0.0, 0.0), left=(1, 0, 0), right=(2, 0, 0),
              value=(0.0, 1.0, -1.0))
    down = Tree(feature=(0, LEAF, LEAF), threshold=(2.0, 0.0, 0.0), left=(1, 0, 0), right=(2, 0, 0),
                value=(0.0, -1.0, 1.0))
    model = TreeClassifier(("x",), (1, 2), (0.0, 0.0), ((up, down),))
    assert model.predict([2.0]) == 1 and model.predict([2.5]) == 2
    assert TreeClassifier.from_dict(model.to_dict()) == model
    binary = TreeClassifier(("x",), (1, 2), (0.0,), ((down,),))  # one log-odds score for two classes
    assert binary.predict([1.0]) == 1 and binary.predict([3.0]) == 2


@pytest.mark.slow
def test_stored_trees_give_scikit_learns_classes():
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    from kernelcast.calibrate import launch_model

    rows = load_profile("h200").data["launches"]["gemm"][::10]  # a tenth of the table: a fit of about a second
    x = np.array([gemm_features(*r[:7]) for r in rows])
    clf = launch_model.new_classifier().fit(x, [r[7] for r in rows])
    stored = TreeClassifier.from_dict(launch_model.export_classifier(clf).to_dict())
    assert [stored.predict(list(v)) for v in x] == list(clf.predict(x))


def test_shipped_profile_has_the_classifier_and_its_held_out_error():
    section = load_profile("h200").data["launches"]["gemm_model"]
    held_out = section["held_out"]
    assert held_out["rows"] == len(load_profile("h200").data["launches"]["gemm"])
    assert held_out["wrong_classifier"] < held_out["wrong_nearest_row"]  # why the classifier is used


def test_h200_gemm_launches_in_clear_regimes():
    table = LaunchTable.from_profile(load_profile("h200").data["launches"])
    # Measured on the H200 (torch 2.11, validation/zoo_measured.json.gz, every optim_* workload): the MLP's
    # fp32 addmm 512 x 1024 x 784 with bias ran one sm80_xmma kernel.
    assert table.gemm_items("float32", False, True, True, 512, 1024, 784) == 1


def test_without_a_classifier_the_nearest_row_decides():
    table = LaunchTable(gemm=(("float32", False, False, False, 64, 64, 64, 1),
                              ("float32", False, False, False, 16, 16, 65536, 2)), conv=())
    assert table.gemm_items("float32", False, False, False, 16, 16, 50000) == 2
    assert table.gemm_items("bfloat16", False, False, False, 16, 16, 50000) is None
