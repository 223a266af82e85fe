"""Program-id arithmetic shared by kernels, pictures and diagrams (plain Python, no imports)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grouped_pid(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """(pid_m, pid_n) of program ``pid``: the GROUP_M ordering of chapter 4's kernel, line for line.

    ``group_m=1`` is plain row-major order (pid_m = pid // num_pid_n).
    """
    num_pid_in_group = group_m * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
