"""placeholder"""


def watching(q):
    return {}
