"""placeholder"""


def plan_speed(q):
    return {}
