"""PyPy ÷ CPython per shape, cold (whole run) and warm (its second half)."""
from bench import results


def test_each_pypy_line_gets_the_cold_and_the_warm_ratio_against_cpython_of_its_shape():
    records = [
        {"shape": "bulk", "interpreter": "pypy", "e2e_rows_s": 120.0, "warm_rows_s": 220.0},
        {"shape": "bulk", "interpreter": "cpython", "e2e_rows_s": 60.0, "warm_rows_s": 55.0},
        {"shape": "oltp", "interpreter": "pypy", "e2e_rows_s": 30.0, "warm_rows_s": 70.0},
        {"shape": "oltp", "interpreter": "cpython", "e2e_rows_s": 10.0, "warm_rows_s": 7.0},
    ]
    results.speedup(records)
    assert (records[0]["pypy_over_cpython"], records[0]["pypy_over_cpython_warm"]) == (2.0, 4.0)
    assert (records[2]["pypy_over_cpython"], records[2]["pypy_over_cpython_warm"]) == (3.0, 10.0)
    assert "pypy_over_cpython" not in records[1] and "pypy_over_cpython_warm" not in records[3]


def test_a_shape_run_under_one_interpreter_or_without_a_rate_gets_no_ratio():
    records = [
        {"shape": "bulk", "interpreter": "pypy", "e2e_rows_s": 120.0, "warm_rows_s": 220.0},
        {"shape": "wide", "interpreter": "pypy", "e2e_rows_s": 50.0, "warm_rows_s": None},
        {"shape": "wide", "interpreter": "cpython", "e2e_rows_s": 10.0, "warm_rows_s": 9.0},
    ]
    results.speedup(records)
    assert "pypy_over_cpython" not in records[0] and "pypy_over_cpython_warm" not in records[0]
    assert records[1]["pypy_over_cpython"] == 5.0 and "pypy_over_cpython_warm" not in records[1]
