"""Cases of the fault catalogue (issue 12), collected by tests/test_faults.py."""
