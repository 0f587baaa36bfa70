#!/usr/bin/env python3
"""gen_bdec.py -- writes tests/unit/bdec_rows.h, the expected values of
Decimal128 arithmetic for test_bdec.c, from Python's decimal module.

Python's decimal implements the General Decimal Arithmetic specification,
which IEEE 754-2008 decimal arithmetic follows; with the context below it is
exactly decimal128: 34 digits, Emax 6144, Emin -6143, half to even, clamp=1
(exponents fold down to 6111 as BID encodings need).  No trap is on, so an
overflow gives an infinity and 0/0 a NaN, as the standard says.

Inputs are BID bit patterns, decoded here the way bdec.c must decode them
(non-canonical coefficients read as 0), and results are encoded back to
bits, NaN always as the canonical quiet NaN (bdec.c keeps no payload).

Run from the repository root:  python3 tests/unit/gen_bdec.py
The output is deterministic (fixed seed); commit it with any change here.
"""
import decimal
import math
import random
import struct
from decimal import Decimal

CTX = decimal.Context(prec=34, Emax=6144, Emin=-6143,
                      rounding=decimal.ROUND_HALF_EVEN, clamp=1, traps=[])
BIAS = 6176
M64 = (1 << 64) - 1
NAN_BITS = (0x7C00000000000000, 0)
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def decode(hi, lo):
    sign = hi >> 63
    comb = (hi >> 58) & 0x1F
    if comb == 0x1F:
        return Decimal('-NaN' if sign else 'NaN')
    if comb == 0x1E:
        return Decimal('-Infinity' if sign else 'Infinity')
    if (hi >> 61) & 3 == 3:
        exp = ((hi >> 47) & 0x3FFF) - BIAS
        coef = 0
    else:
        exp = ((hi >> 49) & 0x3FFF) - BIAS
        coef = ((hi & ((1 << 49) - 1)) << 64) | lo
        if coef >= 10**34:
            coef = 0
    return Decimal((sign, tuple(int(c) for c in str(coef)), exp))


def encode(d):
    if d.is_nan():
        return NAN_BITS
    sign, digits, exp = d.as_tuple()
    if d.is_infinite():
        return ((sign << 63) | 0x7800000000000000, 0)
    coef = int(''.join(map(str, digits)))
    if coef == 0:  # a zero's exponent is clamped into range, as bdec.c does
        exp = min(max(exp, -BIAS), 6111)
    assert coef < 10**34 and -BIAS <= exp <= 6111, d
    return ((sign << 63) | ((exp + BIAS) << 49) | (coef >> 64), coef & M64)


def dec(text):
    """A canonical decimal128 from text, exactly (it must fit)."""
    d = Decimal(text)
    if d.is_nan() or d.is_infinite() or d.is_zero():
        return encode(d)
    f = CTX.plus(d)  # folds 1E+6144 down to 1000...0E+6111
    assert f == d, text
    return encode(f)


def dbits(x):
    return struct.unpack('<Q', struct.pack('<d', x))[0]


def bits_double(b):
    return struct.unpack('<d', struct.pack('<Q', b))[0]


def sgn(x):
    return (x > 0) - (x < 0)


def mongo_cmp(a, b):
    """MongoDB's order: NaN below everything and equal to NaN."""
    if a.is_nan() or b.is_nan():
        return int(b.is_nan()) - int(a.is_nan())
    return sgn((a > b) - (a < b))


rows = []


def row(op, a=(0, 0), b=(0, 0), x=0, r=(0, 0), rc=0):
    rows.append((op, a, b, x & M64, r, rc))


# ---- inputs -----------------------------------------------------------------
rnd = random.Random(20261129)

SPECIAL = ['0', '-0', '0E-6176', '-0E-6176', '0E+6111', '0E+10', '0.00', '1', '-1',
           '1.0', '1.00', '10', '0.1', '-0.1', '0.5', '1.5', '2.5', '-2.5', '3',
           '7', '123.456', '-123.4560', 'NaN', 'Infinity', '-Infinity',
           '9' * 34, '-' + '9' * 34, '1' + '0' * 33, '5' + '0' * 33,
           '9' * 34 + 'E+6111', '-' + '9' * 34 + 'E+6111', '1E+6144', '1E+6111',
           '1E-6176', '-1E-6176', '1E-6143', '9' * 34 + 'E-6176', '1' + '0' * 33 + 'E-6176',
           '5E-6176', '15E-6176', '9223372036854775807',
           '-9223372036854775808', '9223372036854775808', '-9223372036854775809',
           '9223372036854775807.5', '-9223372036854775808.9', '1E+19', '1E+18',
           '0.999999999999999999999999999999999', '1.000000000000000000000000000000001',
           '4.999999999999999999999999999999999', '0.5000000000000000000000000000000000',
           '1E+100', '1E-100', '12345678901234567890123456789012.34',
           '3.141592653589793238462643383279503', '2.718281828459045235360287471352662',
           '1E+308', '1.797693134862315708145274237317044E+308', '4.940656458412465441765687928682214E-324',
           '2.470328229206232720882538037797386E-324', '1E-400', '1E+400', '9007199254740993',
           '9007199254740992', '0.1000000000000000055511151231257827', '100', '1E+2', '1E+3',
           '2', '4', '8', '0.25', '0.125', '1E-1', '1E-34', '1E+34', '1E+33']
SPECIAL_BITS = [dec(s) for s in SPECIAL]
# Non-canonical encodings: a coefficient above 10^34-1 (first form), and
# the second form ("11" after the sign), both read as zero.
NONCANON = [((0x3040 << 48) | ((10**34) >> 64), (10**34) & M64),
            ((1 << 63) | (0x3040 << 48) | ((1 << 49) - 1), M64),
            (0x6C10000000000000, 5),   # 11 form, exponent bits 0x3040 - ...
            (0x7000000000000000, 0),   # 11 form, large exponent
            (0x7E00000000000000, 1)]   # signalling NaN with a payload


def rand_dec(kind=None):
    kind = kind if kind is not None else rnd.randrange(9)
    sign = rnd.randrange(2)
    if kind == 0:  # small integers
        coef, exp = rnd.randrange(0, 1000), 0
    elif kind == 1:  # full 34 digits around 1
        coef, exp = rnd.randrange(10**33, 10**34), rnd.randrange(-40, 5)
    elif kind == 2:  # random digits, moderate exponent
        coef, exp = rnd.randrange(0, 10**rnd.randrange(1, 35)), rnd.randrange(-30, 30)
    elif kind == 3:  # huge
        coef, exp = rnd.randrange(1, 10**rnd.randrange(1, 35)), rnd.randrange(6000, 6112)
    elif kind == 4:  # tiny, subnormal range
        coef, exp = rnd.randrange(0, 10**rnd.randrange(1, 35)), rnd.randrange(-6176, -6100)
    elif kind == 5:  # any exponent
        coef, exp = rnd.randrange(0, 10**rnd.randrange(1, 35)), rnd.randrange(-6176, 6112)
    elif kind == 6:  # many nines / ones (carries)
        n = rnd.randrange(1, 35)
        coef = int(rnd.choice(['9', '1', '5', '49', '50']) * 40) % 10**n
        exp = rnd.randrange(-40, 40)
    elif kind == 7:  # money-like
        coef, exp = rnd.randrange(0, 10**12), -2
    else:  # int64-ish
        coef, exp = rnd.randrange(0, 1 << 64), rnd.choice([0, 0, -1, -3, 1])
    return encode(Decimal((sign, tuple(int(c) for c in str(coef)), exp)))


def rand_double():
    k = rnd.randrange(6)
    if k == 0:
        return bits_double(rnd.getrandbits(64))
    if k == 1:
        return float(rnd.randrange(-10**6, 10**6)) / rnd.choice([1, 2, 4, 10, 100, 3])
    if k == 2:
        return rnd.uniform(-1e20, 1e20)
    if k == 3:
        return math.ldexp(rnd.random(), rnd.randrange(-1080, 1024)) * rnd.choice([1, -1])
    if k == 4:
        return float(rnd.randrange(-(1 << 62), 1 << 62))
    return rnd.choice([0.1, 0.2, 0.3, 1.0, -1.0, 2.5, 1e308, 5e-324, -5e-324,
                       2.2250738585072014e-308, 1.7976931348623157e308,
                       9007199254740993.0, 9007199254740992.0, 0.5, 1e-310,
                       123.456, 1e15, 1e16, 0.0, -0.0])


def near_double(d):
    """A decimal equal to, or one unit of 34 digits away from, the double."""
    x = Decimal(d)  # exact
    y = CTX.plus(x)
    return encode(CTX.next_plus(y) if rnd.randrange(3) == 0 else
                  CTX.next_minus(y) if rnd.randrange(2) else y)


POOL = SPECIAL_BITS + NONCANON
DOUBLES = [0.0, -0.0, 0.1, -0.1, 0.5, 1.0, -1.0, 1.5, 2.5, 3.0, 1e308, -1e308,
           1.7976931348623157e308, 5e-324, -5e-324, 2.2250738585072014e-308,
           9007199254740992.0, 9007199254740993.0, 9007199254740994.0,
           9.223372036854775807e18, -9.223372036854775808e18, 1e15, 1e16, 1e17,
           123.456, 0.3, 1e-300, 1e300, 1e22, 1e23, math.inf, -math.inf, math.nan,
           4.35, 2.675, 1e-7, 0.000123]

# ---- comparisons --------------------------------------------------------------
for a in POOL[::2]:
    for b in POOL[1::2]:
        row('CMP', a, b, rc=mongo_cmp(decode(*a), decode(*b)))
# equal values written with different exponents
for _ in range(300):
    a = rand_dec(rnd.choice([0, 1, 2, 6, 7]))
    da = decode(*a)
    if da.is_nan() or da.is_infinite():
        continue
    t = da.as_tuple()
    pad = rnd.randrange(0, 34 - len(t.digits) + 1)
    db = Decimal((t.sign, t.digits + (0,) * pad, t.exponent - pad))
    if db.as_tuple().exponent < -BIAS:
        continue
    b = encode(db)
    row('CMP', a, b, rc=mongo_cmp(da, db))
for _ in range(1000):
    a, b = rand_dec(), rand_dec()
    if rnd.randrange(4) == 0:  # near: one unit apart
        b = encode(CTX.next_plus(decode(*a)) if rnd.randrange(2) else CTX.next_minus(decode(*a)))
    row('CMP', a, b, rc=mongo_cmp(decode(*a), decode(*b)))

I64S = [0, 1, -1, 2, 10, 100, I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1,
        1 << 53, (1 << 53) + 1, -(1 << 53) - 1, 10**18, -10**18, 999999999999999999]
for a in SPECIAL_BITS[::2] + NONCANON:
    for i in I64S:
        row('CMPI', a, x=i, rc=mongo_cmp(decode(*a), Decimal(i)))
for _ in range(400):
    i = rnd.choice([rnd.randrange(I64_MIN, I64_MAX + 1), rnd.randrange(-1000, 1000)])
    d = Decimal(i)
    cands = [encode(d), encode(CTX.next_plus(d)), encode(CTX.next_minus(d)),
             encode(CTX.multiply(d, Decimal('1.0'))), rand_dec()]
    a = rnd.choice(cands)
    row('CMPI', a, x=i, rc=mongo_cmp(decode(*a), d))


def dcmp(a, x):
    da = decode(*a)
    if math.isnan(x) or da.is_nan():
        return int(math.isnan(x)) - int(da.is_nan())
    dx = Decimal(x)  # exact, infinities too
    return sgn((da > dx) - (da < dx))


for a in SPECIAL_BITS[::4] + NONCANON:
    for x in DOUBLES:
        row('CMPD', a, x=dbits(x), rc=dcmp(a, x))
for _ in range(1000):
    x = rand_double()
    a = near_double(x) if (not math.isnan(x) and not math.isinf(x) and
                           rnd.randrange(3)) else rand_dec()
    row('CMPD', a, x=dbits(x), rc=dcmp(a, x))

# ---- conversions --------------------------------------------------------------
for i in I64S + [rnd.randrange(I64_MIN, I64_MAX + 1) for _ in range(100)]:
    row('FROMI', x=i, r=encode(Decimal(i)))


def from_double(x):
    if math.isnan(x):
        return NAN_BITS
    if math.isinf(x) or x == 0:
        return encode(Decimal(x))  # 0.0 -> 0, -0.0 -> -0 (exponent 0)
    return encode(Decimal(format(x, '.14e')))  # 15 digits, one rounding


for x in DOUBLES + [rand_double() for _ in range(400)]:
    row('FROMD', x=dbits(x), r=from_double(x))


def to_double(a):
    d = decode(*a)
    return dbits(math.nan) if d.is_nan() else dbits(float(d))


def to_i64(a):
    d = decode(*a)
    if d.is_nan() or d.is_infinite():
        return -1, 0
    v = int(d)  # toward zero
    if v < I64_MIN or v > I64_MAX:
        return -1, 0
    return 0, v & M64


for a in POOL + [rand_dec() for _ in range(400)] + \
        [near_double(rand_double()) for _ in range(200)]:
    row('TOD', a, r=(to_double(a), 0))
    rc, v = to_i64(a)
    row('TOI', a, rc=rc, r=(v, 0))

# ---- arithmetic -----------------------------------------------------------------


def arith(op, a, b):
    da, db = decode(*a), decode(*b)
    rc = 0
    if op == 'ADD':
        r = CTX.add(da, db)
    elif op == 'SUB':
        r = CTX.subtract(da, db)
    elif op == 'MUL':
        r = CTX.multiply(da, db)
    else:
        r = CTX.divide(da, db)
        rc = int(not db.is_nan() and not db.is_infinite() and db == 0)
    return encode(r), rc


def arith_pair():
    k = rnd.randrange(8)
    if k == 0:
        return rand_dec(), rand_dec()
    if k == 1:  # close exponents, full coefficients: carries and ties
        return rand_dec(1), rand_dec(1)
    if k == 2:  # one from the pool
        return rnd.choice(POOL), rand_dec()
    if k == 3:  # ties: 34 nines plus a half-ish
        a = encode(Decimal('9' * 34))
        b = encode(Decimal(rnd.choice(['0.5', '0.49', '0.51', '-0.5', '1.5', '0.50000001',
                                       '5E-1', '-0.4999999'])))
        return (a, b) if rnd.randrange(2) else (b, a)
    if k == 4:  # far apart exponents
        return rand_dec(rnd.choice([1, 2])), encode(decode(*rand_dec(2)).scaleb(
            rnd.randrange(-80, 80)))
    if k == 5:  # subnormal neighbourhood
        return rand_dec(4), rand_dec(rnd.choice([4, 0, 2]))
    if k == 6:  # near each other (cancellation)
        a = rand_dec(1)
        return a, encode(CTX.next_plus(decode(*a)))
    return rand_dec(8), rand_dec(8)


def mk(sign, coef, exp):
    return encode(Decimal((sign, tuple(int(c) for c in str(coef)), exp)))


def tie_pair(op):
    """Pairs whose exact result sits at, or one unit beside, a rounding tie,
    where only a sticky digit far below decides (bdec.c folds the digits
    below its working width into one)."""
    if op in ('ADD', 'SUB'):
        e = rnd.randrange(-60, 60)
        a = mk(rnd.randrange(2), rnd.randrange(10**33, 10**34), e)
        j = rnd.choice([-2, -1, 0, 0, 1, 1, 2, 3, 5, 40])
        b = mk(rnd.randrange(2), 5 * 10**33 + rnd.choice([-1, 0, 1, 1]), e - 34 - j)
        return (a, b) if rnd.randrange(2) else (b, a)
    if op == 'MUL':
        j = rnd.randrange(1, 31)
        a = mk(rnd.randrange(2), 5 * 10**j + rnd.choice([-1, 0, 0, 1]), rnd.randrange(-20, 5))
        b = mk(rnd.randrange(2), rnd.randrange(10**33, 10**34) | rnd.randrange(2),
               rnd.randrange(-20, 5))
        return (a, b) if rnd.randrange(2) else (b, a)
    a = mk(rnd.randrange(2), rnd.randrange(10**33, 10**34), rnd.randrange(-20, 20))
    b = mk(rnd.randrange(2), rnd.choice([2, 4, 8, 16, 5, 20, 25, 40, 3, 7]),
           rnd.randrange(-3, 3))
    return a, b


for op in ('ADD', 'SUB', 'MUL', 'DIV'):
    for _ in range(150):
        a, b = tie_pair(op)
        r, rc = arith(op, a, b)
        row(op, a, b, r=r, rc=rc)
    for a in SPECIAL_BITS[:40:2] + NONCANON:
        for b in SPECIAL_BITS[:40:3] + NONCANON[:2]:
            r, rc = arith(op, a, b)
            row(op, a, b, r=r, rc=rc)
    for _ in range(800):
        a, b = arith_pair()
        r, rc = arith(op, a, b)
        row(op, a, b, r=r, rc=rc)

for a in POOL + [rand_dec() for _ in range(300)]:
    da = decode(*a)
    if da.is_nan() or da.is_infinite():
        r = da
    else:
        r = da.to_integral_value(rounding=decimal.ROUND_DOWN)
    row('TRUNC', a, r=encode(r))

# ---- output -----------------------------------------------------------------------
with open('tests/unit/bdec_rows.h', 'w') as f:
    f.write('/* bdec_rows.h -- generated by tests/unit/gen_bdec.py from Python\'s\n'
            ' * decimal module; do not edit.  R(op, a.high, a.low, b.high, b.low, x,\n'
            ' * r.high, r.low, rc), the 64-bit words in hex without 0x: see\n'
            ' * test_bdec.c for what each op reads. */\n')
    for op, a, b, x, r, rc in rows:
        f.write('R(%s,%x,%x,%x,%x,%x,%x,%x,%d)\n'
                % (op, a[0], a[1], b[0], b[1], x, r[0], r[1], rc))
print(len(rows), 'rows')
