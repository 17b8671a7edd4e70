"""An independent model of Steps 2-3 of llama.cpp's DRY apply (0.3.36), written to triage the Z-algorithm survivors of
the full mutation run: python3 zsim.py MUTATION... compares each modelled mutation with the pristine model on every
history to length 10 over 2 and 3 symbols (allowed_length 0-2), then on 5,000 random ones to length 40, and prints
the first history that tells them apart (None: none). rt=k+n (a box one too long) is the positive control."""
import random, itertools, sys
def step23(h, allowed=1, mut=None, rep_limit=None):
    # h: history oldest..newest; rat(i) = h[-1-i]
    L = len(h)
    if L <= allowed: return {}
    rat = lambda i: h[L-1-i]
    cnt = [0]*L
    if rep_limit is None: rep_limit = L
    last = L-1
    rt = -1 if mut=='rt0=-1' else 0
    lt = 1 if mut=='lt0=1' else (-1 if mut=='lt0=-1' else 0)
    kmax = L+1 if mut=='k<=L' else L
    for k in range(1, kmax if mut!='k<=L' else L+1):
        if mut=='k<=L' and k == L:
            # C++: k < last_n_repeat -> k <= : k = L: rat(n+k) out of range; emulate: while n+k<L false immediately -> n=0; cnt[last-k] = cnt[-1] -> writes index -1 (UB)
            pass
        cond = (k >= rt) if mut=='k>=rt' else (k > rt)
        if cond:
            n = 0
            while n + k < L and rat(n) == rat(n+k): n += 1
            if k <= L-1: cnt[last-k] = min(n, rep_limit)
            test = {'n>-1': n > -1, 'n>1': n > 1, 'n<=0': n <= 0, 'n>=0': n >= 0}.get(mut, n > 0)
            if test:
                lt = k
                if mut=='rt=k-n-1': rt = k - n - 1
                elif mut=='rt=k+n-2': rt = k + n - 2
                elif mut=='rt del': pass
                elif mut=='rt=k+n': rt = k + n
                else: rt = k + n - 1
        else:
            p = k - lt
            rpl = rt - k + 1
            if cnt[last-p] < rpl:
                n = min(cnt[last-p], rep_limit)
                if mut=='copy-1': n -= 1
                if mut != 'copy-del': cnt[last-k] = n
            else:
                i = rt + 1
                while i < L and rat(i) == rat(i-k): i += 1
                n = min(i-k, rep_limit)
                cnt[last-k] = n
                lt = k; rt = i - 1
    mx = {}
    for i in range(L-1):
        r = cnt[i]
        if r >= allowed:
            tok = rat(L-2-i)
            if tok not in mx or mx[tok] < r: mx[tok] = r
    return mx
muts = sys.argv[1:] or ['rt=k-n-1','rt=k+n-2','copy-1','n>-1','rt0=-1','lt0=1','n>1','lt0=-1','rt del','n<=0','k>=rt','n>=0']
random.seed(1)
for m in muts:
    found = None
    for n in range(1, 11):
        for k in (2,3):
            for h in itertools.product(range(k), repeat=n):
                for a in (0,1,2):
                    if step23(h, a, None) != step23(h, a, m):
                        found = (h, a); break
                if found: break
            if found: break
        if found: break
    if not found:
        for _ in range(5000):
            n = random.randint(2, 40); k = random.randint(2, 4)
            h = tuple(random.randrange(k) for _ in range(n)); a = random.randint(0, 3)
            if step23(h, a, None) != step23(h, a, m): found = (h, a); break
    print(m, found)
