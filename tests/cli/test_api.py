"""The Python API's names: `kernelcast.capture` and `kernelcast.predict` are the functions, whatever was imported."""

import kernelcast


def test_api_functions_win_over_stage_subpackages():
    # Importing a stage subpackage makes Python set it as an attribute of `kernelcast`; the API names must stay.
    import kernelcast.capture.workload  # noqa: F401
    import kernelcast.predict.calibrated  # noqa: F401
    import kernelcast.report  # noqa: F401
    from kernelcast import api

    assert kernelcast.capture is api.capture and kernelcast.predict is api.predict
    assert kernelcast.predict_file is api.predict_file and kernelcast.capture_file is api.capture_file


def test_stage_subpackages_stay_importable():
    from kernelcast.capture import workload
    from kernelcast.predict import calibrated

    assert workload.EXAMPLE_PREFIX == "example:" and calibrated.CalibratedModel


def test_other_attributes_are_still_settable():
    kernelcast._test_marker = 1
    assert kernelcast._test_marker == 1
    del kernelcast._test_marker
