def make_divisible(v, divisor=8):
    return max(divisor, int(v + divisor / 2) // divisor * divisor)
