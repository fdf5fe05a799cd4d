#!/usr/bin/env python3
"""Generative differential test of gpulsed's PromQL engine and query API
against a real Prometheus holding the same samples.

Each expression is drawn from PromQL's grammar (tests/promql_gen/README in
docs/internals/promql.md, "Generative differential test"): selectors with
matchers drawn from the stored series, every function and aggregation
gpulse supports, every binary operator with vector matching, offset, @,
subqueries, special numbers, nested to a bounded depth, and a fraction
made invalid on purpose. Expression N of seed S is drawn from its own
random stream, so `--seed S --only N` reproduces it alone.

Every expression runs as instant queries at several times and as one
range query on both servers; the status, error type, result type, label
sets and values (relative 1e-9, NaN equal to NaN, order only after
sort/sort_desc/topk/bottomk) must agree. Values are compared as numbers;
how they are written is checked once, by a dedicated check over
generated numbers of every magnitude. /api/v1/series, /labels and
/label/NAME/values get generated match[] and windows too.

Exit status: 0 all agree, 1 a disagreement (each printed with the seed
and index that reproduce it), 2 bad usage or the data differ, 3 gpulsed
stopped answering (the caller may restart it and go on with --first).
"""
import argparse
import json
import math
import os
import random
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# ---------------------------------------------------------------- HTTP

class Down(Exception):
    """The server did not answer at all (a crash, a refused connection)."""


def request(base, path, params, timeout=30):
    """GET base+path with params (a list of pairs); returns (code, body
    text). A 4xx/5xx is an answer; no answer at all raises Down."""
    url = base + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
        raise Down(f"{url}: {e}")


def answer(base, path, params):
    """(code, parsed JSON or None, text)."""
    code, text = request(base, path, params)
    try:
        return code, json.loads(text), text
    except ValueError:
        return code, None, text

# ---------------------------------------------------------------- the data

def raw_samples(base, t_end, span_s):
    """Every series' raw samples in (t_end - span, t_end]:
    {labels tuple: [(ms, value string)]}."""
    code, d, text = answer(base, "/api/v1/query",
                           [("query", '{__name__=~".+"}[%ds]' % span_s), ("time", fmt_time(t_end))])
    if code != 200 or not d or d.get("status") != "success":
        raise SystemExit(f"promql_gen: {base}: raw samples: {code} {text[:300]}")
    out = {}
    for s in d["data"]["result"]:
        out[labels_key(s["metric"])] = [(round(float(t) * 1000), v) for t, v in s["values"]]
    return out


def check_data(gp, pr, t_end, span_s):
    """The two stores must hold the same samples (every series, timestamp
    and value) over the span; returns the series and the first and last
    sample times (ms)."""
    a, b = raw_samples(gp, t_end, span_s), raw_samples(pr, t_end, span_s)
    problems = []
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            problems.append(f"series {dict(k)} only in {'gpulsed' if k in a else 'Prometheus'}")
            continue
        if not same_samples(a[k], b[k]):
            da, db = dict(a[k]), dict(b[k])
            miss = sorted(set(da) ^ set(db))
            diff = [t for t in set(da) & set(db) if float(da[t]) != float(db[t]) and
                    not (math.isnan(float(da[t])) and math.isnan(float(db[t])))]
            problems.append(f"series {dict(k)}: {len(a[k])} vs {len(b[k])} samples, "
                            f"timestamps in one only {miss[:5]}, values differ at {sorted(diff)[:5]}")
    n = sum(len(v) for v in a.values())
    if problems:
        for p in problems[:20]:
            print("DATA:", p)
        raise SystemExit(f"promql_gen: the stores differ ({len(problems)} series); "
                         "no query is compared")
    if not a or n == 0:
        raise SystemExit("promql_gen: no samples stored")
    first = min(v[0][0] for v in a.values())
    last = max(v[-1][0] for v in a.values())
    print(f"data: {len(a)} series, {n} samples, equal in both, "
          f"from {first / 1000:.3f} to {last / 1000:.3f}")
    return a, first, last


def same_samples(x, y):
    """Equal timestamps and values (as numbers: how a value is written is
    the format check's business; NaN equals NaN)."""
    if [t for t, _ in x] != [t for t, _ in y]:
        return False
    for (_, u), (_, v) in zip(x, y):
        fu, fv = float(u), float(v)
        if fu != fv and not (math.isnan(fu) and math.isnan(fv)):
            return False
    return True


def labels_key(m):
    return tuple(sorted(m.items()))


def fmt_time(t):
    return ("%.3f" % t) if isinstance(t, float) else str(t)

# ---------------------------------------------------------------- generator

RANGE_FNS = ["rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets",
             "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
             "count_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
             "present_over_time", "absent_over_time"]
ELEMENT_FNS = ["abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "deg",
               "rad", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin",
               "sinh", "tan", "tanh", "timestamp", "sort", "sort_desc", "absent"]
CALENDAR_FNS = ["day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour",
                "minute", "month", "year"]
SIMPLE_AGGS = ["sum", "avg", "min", "max", "count", "group", "stddev", "stdvar"]
ARITH = ["+", "-", "*", "/", "%", "^", "atan2"]
COMPARE = ["==", "!=", ">", "<", ">=", "<="]
SETOPS = ["and", "or", "unless"]
DURATIONS = ["1s", "2s", "5s", "10s", "15s", "30s", "1m", "90s", "1m30s", "2m", "5m", "500ms",
             "250ms", "3s"]
OFFSETS = ["1s", "5s", "10s", "30s", "1m", "2m", "-5s", "-30s", "500ms", "1m5s"]
SPECIAL_NUMBERS = ["0", "-0", "1", "-1", "2", "0.5", "-0.5", "NaN", "Inf", "-Inf", "+Inf",
                   "1e21", "1e-7", "1e308", "-1e308", "5e-324", "1e-300", "123456789.125",
                   "0x1F", "010", "1.5e3", "100", "1000000", "0.1", "3", "10"]


def rx_escape(s):
    """s as a regular expression that matches it alone, in the syntax RE2
    and POSIX share (Python's re.escape also escapes spaces, which RE2
    refuses)."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", s)


class Gen:
    """One expression's generator over the stored series; r is its own
    random stream."""

    def __init__(self, r, series, t0, t1, depth):
        self.r = r
        self.series = series  # list of label dicts, sorted
        self.t0, self.t1 = t0, t1  # the data window, seconds
        self.max_depth = depth
        by_name = {}
        for s in series:
            by_name.setdefault(s["__name__"], []).append(s)
        # Half the selectors read the GPU series (10 Hz, varied values),
        # half the self-metrics (1 Hz, many names).
        self.gpu_names = sorted(n for n in by_name if n.startswith("gpulse_gpu_"))
        self.other_names = sorted(n for n in by_name if not n.startswith("gpulse_gpu_"))
        self.by_name = by_name
        names = set()
        for s in series:
            names.update(k for k in s if k != "__name__")
        self.label_names = sorted(names)

    def chance(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return self.r.choice(seq)

    # --- leaves

    def number(self):
        r = self.r
        c = r.random()
        if c < 0.45:
            return self.pick(SPECIAL_NUMBERS)
        if c < 0.7:
            return str(r.randint(-20, 100))
        if c < 0.85:
            return repr(round(r.uniform(-1000, 1000), r.randint(0, 6)))
        return "%.6g" % (r.uniform(1, 10) * 10 ** r.randint(-30, 30))

    def string(self):
        return json.dumps(self.pick(["a", "", "x y", "gpu", "0", "1", "é", "a\\b", "\t"]))

    def label_value_regex(self, values):
        """A regex over some of the stored values of a label."""
        c = self.r.random()
        if c < 0.3:
            return "|".join(rx_escape(v) for v in
                            self.r.sample(values, min(len(values), self.r.randint(1, 3))))
        if c < 0.5:
            v = self.pick(values)
            return rx_escape(v[: max(1, len(v) // 2)]) + ".*"
        return self.pick([".*", ".+", "", "x.*", "[0-9]+", "[a-f0-9-]+", "(a|b)*",
                          "nonexistent", ".*0", "(.+)"])

    def matchers(self, s, with_name):
        """Label matchers drawn from the series s (a dict)."""
        out = []
        keys = [k for k in s if k != "__name__"]
        for k in self.r.sample(keys, min(len(keys), self.r.choice([0, 0, 1, 1, 2, 3]))):
            values = sorted({x.get(k, "") for x in self.series if k in x}) or [""]
            op = self.pick(["=", "=", "!=", "=~", "!~"])
            if op in ("=", "!="):
                v = s[k] if self.chance(0.7) else self.pick(values + ["", "nope"])
                out.append(f"{k}{op}{json.dumps(v)}")
            else:
                out.append(f"{k}{op}{json.dumps(self.label_value_regex(values))}")
        if self.chance(0.05):
            out.append(f'{self.pick(["nolabel", "le"])}{self.pick(["=", "!=", "=~"])}""')
        if with_name:
            out.append(f'__name__{self.pick(["=", "=~"])}{json.dumps(s["__name__"])}')
        return out

    def selector(self):
        names = self.gpu_names if self.gpu_names and (self.chance(0.6) or not self.other_names) \
            else self.other_names
        s = self.pick(self.by_name[self.pick(names)])
        c = self.r.random()
        if c < 0.75:
            m = self.matchers(s, False)
            text = s["__name__"] + ("{" + ", ".join(m) + "}" if m or self.chance(0.1) else "")
        elif c < 0.9:
            m = self.matchers(s, True)
            self.r.shuffle(m)
            text = "{" + ",".join(m) + "}"
        else:
            prefix = s["__name__"][: self.r.randint(3, len(s["__name__"]))]
            m = [f'__name__=~{json.dumps(rx_escape(prefix) + ".*")}'] + self.matchers(s, False)
            text = "{" + ", ".join(m) + "}"
        return text

    def at_time(self):
        c = self.r.random()
        if c < 0.3:
            return "start()"
        if c < 0.6:
            return "end()"
        t = self.t0 + self.r.random() * (self.t1 - self.t0 + 20) - 10
        return "%.3f" % t

    def modifiers(self, text):
        parts = []
        if self.chance(0.2):
            parts.append("offset " + self.pick(OFFSETS))
        if self.chance(0.15):
            parts.append("@ " + self.at_time())
        self.r.shuffle(parts)
        return " ".join([text] + parts)

    # --- by type

    def gen(self, typ, d):
        return {"vector": self.vector, "scalar": self.scalar, "matrix": self.matrix,
                "string": lambda d: self.string()}[typ](d)

    def paren(self, text):
        return "(" + text + ")" if self.chance(0.8) else text

    def matrix(self, d):
        if d > 0 and self.chance(0.25):
            inner = self.vector(d - 1)
            step = self.pick(["1s", "2s", "5s", "10s", "", "3s"])
            rng = self.pick(["5s", "10s", "30s", "1m", "2m", "15s"])
            return self.modifiers(f"({inner})[{rng}:{step}]")
        return self.modifiers(self.selector() + "[" + self.pick(DURATIONS) + "]")

    def scalar(self, d):
        c = self.r.random()
        if d <= 0 or c < 0.3:
            return self.pick([self.number()] * 6 + ["time()", "pi()"])
        if c < 0.65:
            return f"scalar({self.vector(d - 1)})"
        if c < 0.8:
            op = self.pick(ARITH + COMPARE)
            mod = " bool" if op in COMPARE else ""
            return f"{self.paren(self.scalar(d - 1))} {op}{mod} {self.paren(self.scalar(d - 1))}"
        if c < 0.9:
            return "-" + self.paren(self.scalar(d - 1))
        return "(" + self.scalar(d - 1) + ")"

    def grouping(self):
        names = self.r.sample(self.label_names + ["__name__", "le", "nolabel"],
                              self.r.randint(0, 3))
        return f"{self.pick(['by', 'without'])} ({', '.join(names)})"

    def aggregation(self, d):
        op = self.pick(SIMPLE_AGGS * 2 + ["topk", "bottomk", "quantile", "count_values"] * 2)
        param = ""
        if op in ("topk", "bottomk"):
            param = self.pick(["1", "2", "3", "0", "5", "-1", "1.5", "NaN"] +
                              [self.scalar(d - 1)]) + ", "
        elif op == "quantile":
            param = self.pick(["0.5", "0", "1", "0.9", "0.25", "-1", "2", "NaN"] +
                              [self.scalar(d - 1)]) + ", "
        elif op == "count_values":
            param = self.pick(['"value"', '"gpu"', '"__name__"', '"v"', '"le"']) + ", "
        arg = self.mixed(d - 1) if self.chance(0.2) else self.vector(d - 1)
        c = self.r.random()
        if c < 0.35:
            return f"{op}({param}{arg})"
        g = self.grouping()
        if c < 0.7:
            return f"{op} {g} ({param}{arg})"
        return f"{op}({param}{arg}) {g}"

    def call(self, d):
        c = self.r.random()
        if c < 0.3:
            fn = self.pick(RANGE_FNS)
            return f"{fn}({self.matrix(d - 1)})"
        if c < 0.5:
            fn = self.pick(ELEMENT_FNS)
            arg = self.mixed(d - 1) if self.chance(0.4) else self.vector(d - 1)
            return f"{fn}({arg})"
        if c < 0.56:
            fn = self.pick(CALENDAR_FNS)
            return f"{fn}()" if self.chance(0.3) else f"{fn}({self.vector(d - 1)})"
        if c < 0.66:
            fn = self.pick(["clamp_min", "clamp_max", "round", "clamp", "round"])
            if fn == "round" and self.chance(0.4):
                return f"round({self.vector(d - 1)})"
            if fn == "clamp":
                return f"clamp({self.vector(d - 1)}, {self.scalar(d - 1)}, {self.scalar(d - 1)})"
            return f"{fn}({self.vector(d - 1)}, {self.scalar(d - 1)})"
        if c < 0.72:
            fn = self.pick(["quantile_over_time", "predict_linear", "holt_winters"])
            if fn == "quantile_over_time":
                q = self.pick(["0.5", "0", "1", "0.9", "-1", "2", "NaN", self.scalar(d - 1)])
                return f"quantile_over_time({q}, {self.matrix(d - 1)})"
            if fn == "predict_linear":
                return f"predict_linear({self.matrix(d - 1)}, {self.pick(['0', '60', '-10', '3600', self.scalar(d - 1)])})"
            f1 = self.pick(["0.5", "0.1", "0.9", "0", "1", "2", "-0.5", self.scalar(d - 1)])
            f2 = self.pick(["0.5", "0.1", "0.9", "0", "1", "2", self.scalar(d - 1)])
            return f"holt_winters({self.matrix(d - 1)}, {f1}, {f2})"
        if c < 0.8:
            return self.label_call(d)
        if c < 0.86:
            return self.histogram(d)
        if c < 0.93:
            return f"vector({self.scalar(d - 1)})"
        return f"absent({self.vector(d - 1)})"

    def mixed(self, d):
        """A vector whose values mix NaN, infinities, zeros and numbers
        (the edges of sorting, topk and comparisons)."""
        v = self.vector(d)
        k = self.pick(["0.5", "1", "100", "0", "1e9"])
        return self.pick([f"({v}) / ({v})", f"ln({v} - {k})", f"sqrt({v} - {k})",
                          f"({v}) / ({v} > {k})", f"({v} - {k}) / 0",
                          f"({v}) or label_replace(vector(NaN), \"gpu\", \"nan\", \"\", \"\")"])

    def matched(self, d):
        """One side grouped by labels both share, so that group_left and
        group_right match (rather than both refusing many-to-many)."""
        many = self.vector(d - 1) if self.chance(0.5) else self.modifiers(self.selector())
        on = self.r.sample(["gpu", "model", "uuid"], self.r.randint(1, 2))
        agg = self.pick(["sum", "max", "count", "group", "min"])
        one = f"{agg} by ({', '.join(on)}) ({self.vector(d - 1)})"
        op = self.pick(ARITH + COMPARE + ["*", "+", "-"])
        mod = " bool" if op in COMPARE and self.chance(0.4) else ""
        incl = ""
        if self.chance(0.6):
            incl = "(" + ", ".join(self.r.sample(self.label_names + ["__name__", "nolabel"],
                                                 self.r.randint(0, 2))) + ")"
        kw = self.pick(["on", "on", "ignoring"])
        if kw == "ignoring":
            on = self.r.sample(self.label_names, self.r.randint(0, 3))
        if self.chance(0.5):
            return f"({many}) {op}{mod} {kw}({', '.join(on)}) group_left{incl} ({one})"
        return f"({one}) {op}{mod} {kw}({', '.join(on)}) group_right{incl} ({many})"

    def label_call(self, d):
        names = self.label_names + ["__name__", "dst", "nolabel"]
        if self.chance(0.6):
            dst = self.pick(names + ["le", "0bad", ""])
            repl = self.pick(["$1", "${1}", "x", "", "$1-$2", "$0", "$name", "a$1b", "$2", "${2}x$1"])
            src = self.pick(names)
            regex = self.pick(["(.*)", "(.+)", "(.)(.*)", "([0-9])", "", "(a|b)+", "x(.*)",
                               "(.*)-(.*)", "((.)+)", "[", "(?P<name>.*)", "(.*)(.*)+",
                               "(.)+", "([A-Z0-9])+.*", "(.)*(.)", "((a)|b)*.*", "(N|V)+(.*)",
                               "(.{2})+"])
            return (f"label_replace({self.vector(d - 1)}, {json.dumps(dst)}, {json.dumps(repl)},"
                    f" {json.dumps(src)}, {json.dumps(regex)})")
        dst = self.pick(names + ["0bad"])
        srcs = [json.dumps(self.pick(names)) for _ in range(self.r.randint(0, 3))]
        sep = json.dumps(self.pick(["-", "", ",", "::"]))
        return f"label_join({', '.join([self.vector(d - 1), json.dumps(dst), sep] + srcs)})"

    def histogram(self, d):
        """histogram_quantile over buckets made from the data: le from a
        stored label or constants, so that `le` parsing and grouping are
        exercised."""
        q = self.pick(["0.5", "0.9", "0.99", "0", "1", "-1", "2", "NaN", self.scalar(d - 1)])
        inner = self.vector(d - 1)
        c = self.r.random()
        if c < 0.4:
            src = self.pick(self.label_names)
            buckets = f'label_replace({inner}, "le", "$1", {json.dumps(src)}, "(.*)")'
        elif c < 0.8:
            parts = []
            for le in self.r.sample(["0.1", "1", "10", "+Inf", "Inf", "1e3", "100", "0x10", "NaN",
                                     "-1", "abc", " 1", "1.0"], self.r.randint(1, 4)):
                parts.append(f'label_replace({inner} * {self.pick(["1", "2", "0.5", "3"])}, "le", '
                             f'{json.dumps(le)}, "", "")')
            buckets = " or ".join(parts)
        else:
            buckets = inner
        if self.chance(0.4):
            buckets = f"sum by (le{self.pick(['', ', gpu', ', __name__', ', model'])}) ({buckets})"
        return f"histogram_quantile({q}, {buckets})"

    def binary_vv(self, d):
        a, b = self.vector(d - 1), self.vector(d - 1)
        c = self.r.random()
        if c < 0.25:
            op = self.pick(SETOPS)
            match = ""
            if self.chance(0.4):
                match = f" {self.pick(['on', 'ignoring'])}({', '.join(self.r.sample(self.label_names, self.r.randint(0, 2)))})"
            return f"{self.paren(a)} {op}{match} {self.paren(b)}"
        op = self.pick(ARITH + COMPARE)
        mod = " bool" if op in COMPARE and self.chance(0.4) else ""
        match = ""
        if self.chance(0.5):
            names = self.r.sample(self.label_names + ["__name__"], self.r.randint(0, 2))
            match = f" {self.pick(['on', 'ignoring'])}({', '.join(names)})"
            if self.chance(0.5):
                side = self.pick(["group_left", "group_right"])
                incl = ""
                if self.chance(0.5):
                    incl = "(" + ", ".join(self.r.sample(self.label_names, self.r.randint(0, 2))) + ")"
                match += f" {side}{incl}"
        return f"{self.paren(a)} {op}{mod}{match} {self.paren(b)}"

    def binary_vs(self, d):
        v, s = self.vector(d - 1), self.scalar(d - 1)
        op = self.pick(ARITH + COMPARE)
        mod = " bool" if op in COMPARE and self.chance(0.4) else ""
        if self.chance(0.5):
            return f"{self.paren(v)} {op}{mod} {self.paren(s)}"
        return f"{self.paren(s)} {op}{mod} {self.paren(v)}"

    def vector(self, d):
        if d <= 0:
            return self.modifiers(self.selector()) if self.chance(0.9) else f"vector({self.number()})"
        c = self.r.random()
        if c < 0.12:
            return self.modifiers(self.selector())
        if c < 0.17:
            return self.matched(d)
        if c < 0.45:
            return self.call(d)
        if c < 0.65:
            return self.aggregation(d)
        if c < 0.8:
            return self.binary_vv(d)
        if c < 0.9:
            return self.binary_vs(d)
        if c < 0.95:
            return self.pick(["-", "+"]) + self.paren(self.vector(d - 1))
        return "(" + self.vector(d - 1) + ")"

    def top(self):
        typ = self.r.choices(["vector", "scalar", "matrix", "string"], [75, 13, 10, 2])[0]
        text = self.gen(typ, self.r.randint(1, self.max_depth))
        if self.chance(0.06):
            text = self.break_it(text)
        return text

    def break_it(self, text):
        """A deliberate mistake: an error is expected from both (or the
        mistake happens to be valid, and both must still agree)."""
        c = self.r.random()
        if c < 0.25 and ")" in text:
            i = self.pick([m.start() for m in re.finditer(r"\)", text)])
            return text[:i] + text[i + 1:]
        if c < 0.4:
            return f"rate({text})"
        if c < 0.55:
            return f"sum({text}[1m])"
        if c < 0.7:
            return f"{text} and {self.number()}"
        if c < 0.8:
            return f"{self.number()} > {self.number()}"
        if c < 0.9:
            return text + self.pick([" offset", "[", " @ ", " by (a)", " group_left ", "}", ","])
        return self.pick(["nosuchfn", "histogram_count", "label_replace"]) + "(" + text + ")"


# ---------------------------------------------------------------- comparison

def close(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


def outer_call(expr):
    """The function or aggregation applied last, when the expression is
    one call (in parentheses or not), else None."""
    e = expr.strip()
    while e.startswith("(") and e.endswith(")") and balanced(e[1:-1]):
        e = e[1:-1].strip()
    m = re.match(r"^([a-z_]+)\s*(?:(?:by|without)\s*\([^()]*\)\s*)?\(", e)
    if not m or not balanced(e[m.end():-1]) or not e.endswith(")"):
        return None
    return m.group(1)


def balanced(s):
    depth = 0
    quote = None
    i = 0
    while i < len(s):
        ch = s[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0


def summarize(code, d, text):
    s = text if d is None else json.dumps(d, sort_keys=True)
    return f"{code} {s[:600]}{'…' if len(s) > 600 else ''}"


def compare(ans_gp, ans_pr, ordered):
    """None when the two answers agree, else a short reason."""
    (cg, dg, tg), (cp, dp, tp) = ans_gp, ans_pr
    if dg is None or dp is None:
        return f"not JSON: gpulsed {cg} {tg[:100]!r}, Prometheus {cp} {tp[:100]!r}"
    sg, sp = dg.get("status"), dp.get("status")
    if sg != sp:
        return f"status: gpulsed {sg} ({cg}), Prometheus {sp} ({cp})"
    if sg == "error":
        if dg.get("errorType") != dp.get("errorType"):
            return f"errorType: gpulsed {dg.get('errorType')}, Prometheus {dp.get('errorType')}"
        return None
    rg, rp = dg["data"], dp["data"]
    if isinstance(rp, list):  # series, labels, label values
        if not isinstance(rg, list):
            return "data is not a list"
        if rp and isinstance(rp[0], dict):
            a = sorted(json.dumps(x, sort_keys=True) for x in rg)
            b = sorted(json.dumps(x, sort_keys=True) for x in rp)
        else:
            a, b = rg, rp
        if a != b:
            only_g = [x for x in a if x not in b][:5]
            only_p = [x for x in b if x not in a][:5]
            return f"lists differ: only gpulsed {only_g}, only Prometheus {only_p}" + \
                ("" if only_g or only_p else " (order)")
        return None
    if rg.get("resultType") != rp.get("resultType"):
        return f"resultType: gpulsed {rg.get('resultType')}, Prometheus {rp.get('resultType')}"
    typ = rp["resultType"]
    if typ in ("scalar", "string"):
        (ta, va), (tb, vb) = rg["result"], rp["result"]
        if round(float(ta) * 1000) != round(float(tb) * 1000):
            return f"{typ} time {ta} vs {tb}"
        if typ == "string":
            return None if va == vb else f"string {va!r} vs {vb!r}"
        return None if close(float(va), float(vb)) else f"scalar {va} vs {vb}"
    if typ == "vector":
        def index(res):
            out = {}
            for s in res:
                out.setdefault(labels_key(s["metric"]), []).append(s["value"])
            return out
        ig, ip = index(rg["result"]), index(rp["result"])
        if set(ig) != set(ip):
            og = [dict(k) for k in ig if k not in ip][:3]
            op = [dict(k) for k in ip if k not in ig][:3]
            return f"label sets: {len(ig)} vs {len(ip)}; only gpulsed {og}; only Prometheus {op}"
        for k in ip:
            a, b = ig[k], ip[k]
            if len(a) != len(b):
                return f"{dict(k)} appears {len(a)} vs {len(b)} times"
            for (ta, va), (tb, vb) in zip(sorted(a, key=lambda x: x[1]), sorted(b, key=lambda x: x[1])):
                if round(float(ta) * 1000) != round(float(tb) * 1000):
                    return f"{dict(k)} time {ta} vs {tb}"
                if not close(float(va), float(vb)):
                    return f"{dict(k)} value {va} vs {vb}"
        if ordered:
            vg = [float(s["value"][1]) for s in rg["result"]]
            vp = [float(s["value"][1]) for s in rp["result"]]
            if not all(close(x, y) for x, y in zip(vg, vp)):
                return f"order of values: gpulsed {vg[:8]}, Prometheus {vp[:8]}"
        return None
    if typ == "matrix":
        ig = {labels_key(s["metric"]): s["values"] for s in rg["result"]}
        ip = {labels_key(s["metric"]): s["values"] for s in rp["result"]}
        if len(ig) != len(rg["result"]):
            return "gpulsed repeats a label set in a matrix"
        if set(ig) != set(ip):
            og = [dict(k) for k in ig if k not in ip][:3]
            op = [dict(k) for k in ip if k not in ig][:3]
            return f"label sets: {len(ig)} vs {len(ip)}; only gpulsed {og}; only Prometheus {op}"
        for k in ip:
            a, b = ig[k], ip[k]
            ta = [round(float(t) * 1000) for t, _ in a]
            tb = [round(float(t) * 1000) for t, _ in b]
            if ta != tb:
                only_a = sorted(set(ta) - set(tb))[:3]
                only_b = sorted(set(tb) - set(ta))[:3]
                return f"{dict(k)}: {len(ta)} vs {len(tb)} points, only gpulsed at {only_a}, only Prometheus at {only_b}"
            for (t, va), (_, vb) in zip(a, b):
                if not close(float(va), float(vb)):
                    return f"{dict(k)} at {t}: {va} vs {vb}"
        return None
    return f"unknown resultType {typ}"

# ---------------------------------------------------------------- allow-list

def load_allow(path):
    """Lines `KIND REGEX REASON...` (tab separated): a disagreement of
    KIND (query, series, labels, values, format) whose text, "REQUEST =>
    WHAT DIFFERS | GPULSED'S ERROR | PROMETHEUS'S ERROR", matches REGEX is reported as allowed, with the
    reason."""
    out = []
    if not path:
        return out
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split("\t")
            parts = [p for p in parts if p != ""]
            if len(parts) < 3:
                raise SystemExit(f"{path}:{n}: expected KIND<TAB>REGEX<TAB>REASON")
            try:
                rx = re.compile(parts[1])
            except re.error as e:
                raise SystemExit(f"{path}:{n}: bad regex: {e}")
            out.append((parts[0], rx, " ".join(parts[2:]), f"{path}:{n}"))
    return out


def allowed(allow, kind, text):
    for k, rx, reason, where in allow:
        if k == kind and rx.search(text):
            return f"{where}: {reason}"
    return None

# ---------------------------------------------------------------- main

class Run:
    def __init__(self, args, series, first_ms, last_ms):
        self.a = args
        self.series = [dict(k) for k in sorted(series)]
        self.t0, self.t1 = first_ms / 1000, last_ms / 1000
        self.allow = load_allow(args.allow)
        self.failures = 0
        self.allowed = 0
        self.queries = 0
        self.errors_both = 0
        self.kinds = {}

    def report(self, kind, index, text, where, reason, ag, ap):
        err = ag[1].get("error", "") if isinstance(ag[1], dict) else ""
        perr = ap[1].get("error", "") if isinstance(ap[1], dict) else ""
        why = allowed(self.allow, kind, f"{text} => {reason} | {err} | {perr}")
        tag = "ALLOWED" if why else "DISAGREE"
        print(f"{tag} [{kind}] seed {self.a.seed} index {index}: {reason}\n"
              f"  request: {text}\n  {where}\n"
              f"  reproduce: --seed {self.a.seed} --only {index}\n"
              f"  gpulsed:    {summarize(*ag)}\n  Prometheus: {summarize(*ap)}")
        if why:
            print(f"  allowed by {why}")
            self.allowed += 1
        else:
            self.failures += 1
        sys.stdout.flush()

    def both(self, path, params):
        self.queries += 1
        try:
            ag = answer(self.a.gpulse, path, params)
        except Down as e:
            kind, index, text = self.current
            print(f"DISAGREE [crash] seed {self.a.seed} index {index}: gpulsed stopped answering\n"
                  f"  request: {text}\n  {path} {params}\n"
                  f"  reproduce: --seed {self.a.seed} --only {index}\n  ({e})")
            sys.stdout.flush()
            raise
        ap = answer(self.a.prometheus, path, params)
        return ag, ap

    def times(self, r):
        t0, t1 = self.t0, self.t1
        pts = []
        for _ in range(self.a.instants):
            c = r.random()
            if c < 0.6:
                t = t0 + r.random() * (t1 - t0)
            elif c < 0.75:
                t = t1
            elif c < 0.85:
                t = t1 + r.choice([1, 30, 299, 301, 600])
            elif c < 0.95:
                t = t0 + r.choice([0, 0.001, 0.5, 1, 5])
            else:
                t = t0 - r.choice([1, 60])
            # Mostly whole milliseconds; sometimes finer (rounding).
            pts.append(("%.3f" if r.random() < 0.9 else "%.6f") % t)
        return pts

    def range_params(self, r):
        step = r.choice([1, 2, 2.5, 5, 7, 10, 15, 30, 0.5, 60])
        n = r.randint(1, 40)
        if r.random() < 0.02:
            # Around the bound of 11 000 points per series.
            step = r.choice([0.001, 0.01])
            n = r.choice([10998, 10999, 11000, 11001])
        start = self.t0 + r.random() * (self.t1 - self.t0) - r.choice([0, 0, 10, 60])
        start = round(start, r.choice([0, 0, 1, 3]))
        end = start + step * n + r.choice([0, 0, 0.25])
        return start, end, step

    def one_query(self, i):
        r = random.Random(f"{self.a.seed}:{i}")
        g = Gen(r, self.series, self.t0, self.t1, self.a.depth)
        expr = g.top()
        if len(expr) > 4000:
            expr = g.selector()
        self.current = ("query", i, expr)
        ordered = outer_call(expr) in ("sort", "sort_desc") or \
            re.match(r"^\(*\s*(topk|bottomk)\s*\(", expr) is not None
        for t in self.times(r):
            ag, ap = self.both("/api/v1/query", [("query", expr), ("time", t)])
            self.tally(ap)
            why = compare(ag, ap, ordered)
            if why:
                self.report("query", i, expr, f"instant at {t} (window start + {float(t) - self.t0:.3f} s)",
                            why, ag, ap)
                return
        start, end, step = self.range_params(r)
        ag, ap = self.both("/api/v1/query_range",
                           [("query", expr), ("start", str(start)), ("end", str(end)), ("step", str(step))])
        self.tally(ap)
        why = compare(ag, ap, False)
        if why:
            self.report("query", i, expr,
                        f"range start {start} end {end} step {step} (window start + {start - self.t0:.3f} s)",
                        why, ag, ap)

    def tally(self, ap):
        d = ap[1]
        k = "error" if not d or d.get("status") != "success" else d["data"].get("resultType", "?")
        self.kinds[k] = self.kinds.get(k, 0) + 1

    def one_meta(self, i):
        r = random.Random(f"{self.a.seed}:meta:{i}")
        g = Gen(r, self.series, self.t0, self.t1, 1)
        kind = r.choice(["series", "labels", "values"])
        params = []
        for _ in range(r.choice([0, 1, 1, 1, 2, 3]) if kind != "series" else r.choice([0, 1, 1, 2])):
            sel = g.selector() if r.random() < 0.9 else r.choice(["up", "{}", "rate(x[1m])", "{a=~\".*\"}"])
            params.append(("match[]", sel))
        c = r.random()
        if c < 0.6:
            start = self.t0 + r.random() * (self.t1 - self.t0) - r.choice([0, 5, 100])
            params.append(("start", "%.3f" % start))
            params.append(("end", "%.3f" % (start + r.choice([0, 0.5, 1, 10, 1000]))))
        elif c < 0.7:
            params.append(("start", "%.3f" % self.t0))
        elif c < 0.8:
            params.append(("end", "%.3f" % self.t1))
        if kind == "series":
            path = "/api/v1/series"
        elif kind == "labels":
            path = "/api/v1/labels"
        else:
            name = r.choice(g.label_names + ["__name__", "nolabel", "0bad"])
            path = f"/api/v1/label/{name}/values"
        self.current = (kind, f"meta:{i}", path)
        ag, ap = self.both(path, params)
        why = compare(ag, ap, False)
        if why:
            self.report(kind, f"meta:{i}", path + "?" + urllib.parse.urlencode(params),
                        "", why, ag, ap)

    def format_check(self):
        """How values are written: the raw strings of generated numbers of
        every magnitude, as scalars and as samples, must be Prometheus's."""
        r = random.Random(f"{self.a.seed}:format")
        nums = ["1e21", "1e20", "123456789012345678901234", "1e-7", "0.000001", "1e-5",
                "5e-324", "1.7976931348623157e308", "0.1", "-0", "NaN", "Inf", "-Inf",
                "100000000000000000000", "1e22", "2.5e-10", "1/3", "2^70", "-2^-70"]
        for _ in range(self.a.format_count):
            nums.append("%.*g" % (r.randint(1, 17), r.uniform(1, 10) * 10 ** r.randint(-40, 40)))
        bad = []
        for x in nums:
            for expr in (x, f"vector({x})"):
                self.current = ("format", "format", expr)
                ag, ap = self.both("/api/v1/query", [("query", expr), ("time", "%.3f" % self.t1)])
                if compare(ag, ap, False):
                    bad.append((expr, ag, ap))
                    continue
                vg = ag[1]["data"]["result"]
                vp = ap[1]["data"]["result"]
                sg = vg[1] if expr == x else vg[0]["value"][1]
                sp = vp[1] if expr == x else vp[0]["value"][1]
                if sg != sp:
                    bad.append((expr, ag, ap))
        for expr, ag, ap in bad:
            self.report("format", "format", expr, f"instant at {self.t1:.3f}",
                        "value written differently", ag, ap)
        print(f"format: {len(nums)} numbers, {len(bad)} written differently")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpulse", required=True, help="gpulsed's URL")
    p.add_argument("--prometheus", required=True, help="Prometheus's URL")
    p.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    p.add_argument("--count", type=int, default=200, help="expressions (default 200)")
    p.add_argument("--seconds", type=float, default=0,
                   help="run for this long instead of --count expressions")
    p.add_argument("--only", default=None,
                   help="run expression N alone (meta:N: metadata request N)")
    p.add_argument("--first", type=int, default=0, help="start at expression N")
    p.add_argument("--meta", type=int, default=None,
                   help="series/labels/values requests (default count/4)")
    p.add_argument("--depth", type=int, default=3, help="nesting bound (default 3)")
    p.add_argument("--instants", type=int, default=3, help="instant times per expression")
    p.add_argument("--format-count", type=int, default=40, help="generated numbers for the format check")
    p.add_argument("--allow", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "allow.tsv"),
                   help="the allow-list (default tests/promql_gen/allow.tsv)")
    p.add_argument("--span", type=int, default=3600, help="seconds of data to compare before --end")
    p.add_argument("--end", type=float, default=None, help="time after every stored sample (default now)")
    p.add_argument("--print", action="store_true", help="only print the expressions")
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 2 ** 31)
    print(f"seed {a.seed}")
    end = a.end if a.end is not None else time.time()
    series, first, last = check_data(a.gpulse, a.prometheus, end, a.span)
    run = Run(a, series, first, last)
    if a.print:
        for i in ([int(a.only)] if a.only is not None else range(a.first, a.first + a.count)):
            print(i, Gen(random.Random(f"{a.seed}:{i}"), run.series, run.t0, run.t1, a.depth).top())
        return 0
    deadline = time.time() + a.seconds if a.seconds else None
    began = time.time()
    i = a.first
    done = 0
    try:
        if a.only is not None:
            if a.only.startswith("meta:"):
                run.one_meta(int(a.only[5:]))
            else:
                run.one_query(int(a.only))
            done = 1
        else:
            if a.first == 0:
                run.format_check()
            n_meta = a.meta if a.meta is not None else max(1, a.count // 4)
            while (time.time() < deadline) if deadline else (i < a.count):
                run.one_query(i)
                done += 1
                # One metadata request every fourth expression.
                if i % 4 == 0 and (deadline or i // 4 < n_meta):
                    run.one_meta(i // 4)
                i += 1
                if done % 100 == 0:
                    print(f"... {done} expressions, {run.queries} requests, "
                          f"{run.failures} disagreements, {time.time() - began:.0f} s")
                    sys.stdout.flush()
    except Down:
        print(f"expressions {a.first}..{i} tried; gpulsed down at index {i}")
        if a.only is None:
            print(f"NEXT {i + 1}")
        return 3
    # Nothing may have changed the data under the comparison.
    check_data(a.gpulse, a.prometheus, end, a.span)
    print(f"seed {a.seed}: {done} expressions (from index {a.first}), {run.queries} requests "
          f"(Prometheus answered {json.dumps(run.kinds, sort_keys=True)}), "
          f"{run.failures} disagreements, {run.allowed} allowed, {time.time() - began:.0f} s")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
