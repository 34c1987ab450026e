"""Row gathers and index_add_: a time per unit (index, atomically added element), not per byte
(calibrate/unit_rates.py)."""

import pytest

from helpers import contiguous, op
from kernelcast.calibrate.unit_rates import fit
from kernelcast.costs import cost_of
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings


def _model():
    gpu = get_gpu("h200")
    return CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)


def _index_select(rows, width, indices, dtype="float32"):
    return op("aten.index_select.default", {"self": contiguous((rows, width), dtype), "dim": 0,
                                            "index": contiguous((indices,), "int64")},
              [contiguous((indices, width), dtype)])


def test_a_row_gather_takes_a_time_per_index_whatever_the_row_width():
    # H200 (validation/h200_sweep_raw.json.gz and zoo gcn_train): 500k indices took 302 µs for rows of 64, 128
    # and 256 fp32 values alike
    model = _model()
    times = [model.estimate(cost_of(_index_select(50_000, w, 500_000))).time_us for w in (64, 128, 256)]
    assert all(280 < t < 330 for t in times)
    assert cost_of(_index_select(50_000, 64, 500_000)).key == ("rows", 500_000, 4)


def test_wide_rows_are_bandwidth_bound():
    narrow = _model().estimate(cost_of(_index_select(4096, 512, 8192))).time_us
    wide = _model().estimate(cost_of(_index_select(4096, 65536, 8192))).time_us  # 2 GB gathered
    assert wide > 50 * narrow


def test_index_add_takes_a_time_per_element_added():
    # zoo gcn_train on the H200: index_add_ of 500k x 256 fp32 rows 912 µs, of 500k x 64 232 µs
    def index_add(width):
        return op("aten.index_add_.default", {"self": contiguous((50_000, width)), "dim": 0,
                                              "index": contiguous((500_000,), "int64"),
                                              "source": contiguous((500_000, width))},
                  [contiguous((50_000, width))])

    model = _model()
    assert model.estimate(cost_of(index_add(256))).time_us == pytest.approx(912, rel=0.1)
    assert model.estimate(cost_of(index_add(64))).time_us == pytest.approx(232, rel=0.1)


def test_the_fit_is_a_line_per_op():
    pytest.importorskip("numpy")
    def case(n, width, us):
        source = {"T": [50_000, width], "dtype": "float32", "stride": [width, 1]}
        return {"kind": "index_select", "n_items": 1, "device_us": us,
                "ops": [{"op": "aten.index_select.default", "outputs": [{"T": [n, width], "dtype": "float32"}],
                         "args": {"self": source, "index": {"T": [n], "dtype": "int64"}}}]}

    # rows of 64 floats (whole 16-byte vectors): the vectorized kernel, a line per index
    cases = [case(n, 64, 2.0 + 0.001 * n) for n in (1000, 10_000, 100_000, 1_000_000)]
    line = fit(cases)["gather_rows"]
    assert line["floor_us"] == pytest.approx(2.0, rel=1e-6) and line["us_per_unit"] == pytest.approx(0.001)
    assert "index_add_elements" not in fit(cases) and "gather_elements" not in fit(cases)
    # rows of 1-5 floats: the elementwise kernel, a floor + a time per index + one per element
    narrow = [case(n, w, 5.0 + 1e-6 * n + 3e-6 * w * n) for n in (1000, 100_000, 3_000_000) for w in (1, 3, 5)]
    plane = fit(cases + narrow)["gather_elements"]
    assert (plane["floor_us"], plane["us_per_index"], plane["us_per_element"]) == pytest.approx((5.0, 1e-6, 3e-6))
    assert fit(cases + narrow)["gather_rows"]["us_per_unit"] == pytest.approx(0.001)
