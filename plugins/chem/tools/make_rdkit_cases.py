"""Regenerate tests/fixtures/rdkit_cases.tsv: RDKit's verdict on real and mutated SMILES.

The chem plugin's test `rdkit_cases` replays every row through the plugin and requires the
same verdict (valid or not) and, for valid rows, the same formula, atom count and weight, so
CI needs no RDKit. Rows:

* `real/<set>`: molecules from public sets shipped in RDKit's source tree (ChEMBL 20 chiral
  molecules, the NCI first 5K, ZINC leads and fragments, the solubility sets of the RDKit
  book, salts from `witch-salts.sdf`, benzodiazepines), kept when RDKit reads them;
* `mut/<kind>`: seeded mutations of those molecules (a character deleted, a ring digit
  doubled, a bond order changed, a case flipped, charges, isotopes, stereo marks, `%nn`
  closures, `.` parts, `:` and `~` bonds, metals in brackets, whitespace, ...), one or two
  per case; each mutated string appears once;
* `hard`: hand-written hard SMILES (each kind where this parser and RDKit once disagreed, and their relatives).

Columns (tab-separated): kind, SMILES, then `invalid`, or formula, atom count (GetNumAtoms)
and average weight (Descriptors.MolWt, 5 decimals). Lines starting with `#` are comments.

    git clone https://github.com/rdkit/rdkit /tmp/rdkit-src   # read at commit 24e544313
    python3 -m venv /tmp/rdkit-venv && /tmp/rdkit-venv/bin/pip install rdkit==2026.9.1
    /tmp/rdkit-venv/bin/python plugins/chem/tools/make_rdkit_cases.py /tmp/rdkit-src \
        > plugins/chem/tests/fixtures/rdkit_cases.tsv

A seed and a count after the source directory (`... /tmp/rdkit-src 7 20000`) make another set,
e.g. to measure the plugin on mutations it was not tuned on.
"""

import gzip
import random
import re
import sys
from pathlib import Path

from rdkit import Chem, RDLogger, rdBase
from rdkit.Chem import Descriptors, rdMolDescriptors

RDLogger.DisableLog("rdApp.*")

SEED = 15
MUTATIONS = 9000

# (set name, path in RDKit's source tree, how to read it)
SOURCES = [
    ("chembl20", "Regress/Data/chembl_20_chiral.smi.gz", "smi"),
    ("nci", "Data/NCI/first_5K.smi", "smi"),
    ("zinc-leads", "Regress/Data/zinc.leads.500.q.smi", "smi"),
    ("zinc-frags", "Regress/Data/zinc.frags.500.q.smi", "smi"),
    ("chembl-1907596", "Code/GraphMol/RascalMCES/data/chembl_1907596.smi", "smi-named"),
    ("bzr", "Docs/Book/data/bzr.smi", "smi"),
    ("solubility", "Docs/Book/data/solubility.train.sdf", "sdf"),
    ("solubility", "Docs/Book/data/solubility.test.sdf", "sdf"),
    ("salts", "rdkit/Chem/test_data/witch-salts.sdf", "sdf"),
]

HARD = [
    # where this parser and RDKit once disagreed, by kind
    "Cn=1ccnc1",
    "c1c=ocn1",
    "c1ccccc1c2c(Cl)cccc#2Cl",
    "NC(=O)c1[nH++]cn(C)n1",
    "CNC(=O)Oc1ccccc1c2OCCO2",
    "c1OCCO1",
    "c1ccccc1:C",
    "CC:N1CCCC1",
    "C[Cu@@H](C)C",
    "C[Cu H](C)C",
    "C[CuH](C)C",
    "C1=CC=C(=C1)[Sb](C)C",
    "C1=Cs2C=CC=CC2=CC=C1",
    "[si]1cccc1",
    "c1cc[si]cc1",
    "C[si]1ccccc1",
    "CC~C",
    "c1cc~ccc1",
    "[O-0]",
    "[O+0]",
    "C%(123)CC%(123)",
    "C%(1)CC%(1)",
    "C%(99999)CC%(99999)",
    "C%(100000)CC%(100000)",
    "[C@SP](F)(Cl)(Br)I",
    "[C@SP1](F)(Cl)(Br)I",
    "F[C@SP2H](Cl)Br",
    "C[C@TB1](F)(Cl)(Br)I",
    "[C@OH](F)(Cl)(Br)(I)(N)O",
    "C\\\\C=C\\\\C",
    "C//C=C/C",
    "C%01CC%01",
    "C%10CC%10",
    "C%00CC%00",
    "C0CC0",
    "CCO ethanol",
    " CCO",
    "O C(C)C",
    "[te]1cccc1",
    "C->[Fe]",
    "[Fe]<-N",
    "C$C",
    "[Ca]$[Ca]",
    "[CH3:0]",
    "[C:12345]",
    "[C:-1]",
    "[2H:1]C",
    "[1000C]",
    "[C+16]",
    "[C+15]",
    "[C++++]",
    "[C---]",
    "[C+-1]",
    "[Hg+2]",
    "c1ccccc1=O",
    "c1ccc#cc1",
    "O=c1ccc(=O)cc1",
    "c1cscc1=O",
    "C1=CS(=O)C=C1",
    "c1ccs(=O)cc1",
    "C[n+]1ccccc1",
    "c1cc[n-]c1",
    "[nH+]1ccccc1",
    "[nH2+]1cccc1",
    "c1cc[c-]cc1",
    "[cH+]1cccccc1",
    "[o+]1ccccc1",
    "[s+]1ccccc1",
    "b1ccccc1",
    "c1cc[bH-]cc1",
    "[as]1cccc1",
    "p1ccccc1",
    "[pH]1cccc1",
    "c1ccc2c(c1)[se]c1ccccc12",
    "[Fe]c1ccccc1",
    "[Na]Oc1ccccc1",
    "[Na+].[O-]c1ccccc1",
    "C[Pt@SP1H](Cl)Cl",
    "C[Cu@H](C)C",
    "C[Cu](C)(C)[H]",
    "[Cu@@H4]",
    "[SiH4]",
    "[Si@H](C)(F)Cl",
    "C[N@@H+](CC)CCC",
    "C[S@@](=O)c1ccccc1",
    "C[S@+]([O-])c1ccccc1",
    "*1ccccc1",
    "c1cc*cc1",
    "[*]",
    "[*+]C",
    "[3*]C",
    "C1CC1C1CC1",
    "C11CC1",
    "C1CC1.",
    ".C",
    "C..C",
    "C.",
    "C(=O)(O)",
    "C=(O)C",
    "C(=O",
    "CC(C)(C)(C)C",
    "[NH4+]",
    "[N+](C)(C)(C)(C)C",
    "N(=O)(=O)c1ccccc1",
    "ON(=O)=O",
    "C=N#N",
    "[nH]1cccc1",
    "n1cccc1",
    "[n]1cccc1",
    "c1ccc2[nH]ccc2c1",
    "c12ccccc1cccc2",
    "c1cccc2c1cccc2",
]

TOKEN = re.compile(
    r"\[[^\]]*\]|Br|Cl|[BCNOPSFI*]|[bcnops]|%\([0-9]+\)|%[0-9]{2}|[0-9]|[-=#$:~/\\]|[().]|\s|."
)
ATOM = re.compile(r"\[[^\]]*\]|Br|Cl|[BCNOPSFI*]|[bcnops]")
RING = re.compile(r"%\([0-9]+\)|%[0-9]{2}|[0-9]")
BOND = re.compile(r"[-=#$:~/\\]")

METALS = ["[Fe]", "[Cu]", "[Cu@@H]", "[Cu@H]", "[Sb]", "[Pt]", "[Zn+2]", "[Sn]", "[Hg]", "[Li]",
          "[Na+]", "[Mg]", "[Pd]", "[Co+3]", "[Ti]", "[Al]", "[Ga]", "[Ge]", "[As]", "[Bi]",
          "[Fe@@H]", "[Sn@H]", "[PtH2]", "[Ag+]", "[K]", "[Ru]", "[Mn@SP1]", "[Ni@TB1]"]
ELEMENT_SWAPS = {
    "c": ["[si]", "[te]", "[se]", "s", "o", "n", "b", "[as]", "p", "[c-]", "[cH]", "[c+]", "[ge]"],
    "n": ["o", "s", "[nH]", "[n+]", "[n-]", "[nH+]", "[nH++]", "[n++]", "p", "c", "[N]"],
    "o": ["s", "[se]", "[te]", "n", "[o+]", "[oH+]", "c"],
    "s": ["o", "[se]", "[te]", "[s+]", "[sH]", "n", "[s@]"],
    "C": ["[Si]", "N", "O", "S", "P", "B", "[Ge]", "[C]", "[CH]", "[CH2]", "[C-]", "[C+]", "Cl"],
    "N": ["O", "C", "[N+]", "[NH+]", "[N-]", "P", "[NH4+]", "[NH3]", "S"],
    "O": ["S", "N", "[O-]", "[OH+]", "[O+]", "C", "[Se]", "F"],
    "S": ["O", "[Se]", "P", "[S+]", "[S-]", "C"],
}
CHARGES = ["+", "-", "++", "--", "+2", "-2", "+3", "+0", "-0", "+15", "+16", "+-", "-+"]
ISOTOPES = ["0", "1", "2", "3", "13", "15", "18", "05", "235", "999", "1000"]
STEREO = ["@", "@@", "@SP", "@SP1", "@SP3", "@SP4", "@TB1", "@TB20", "@TB21", "@OH1", "@OH30", "@AL1", "@@@"]
BONDS = ["-", "=", "#", "$", ":", "~", "/", "\\", "\\\\", "//", "->", "<-", "=="]
NOISE = list("CcNnOoSsPpBbFIl()[]=#$:~/\\@+-%.*0123456789H ")


def rdkit_row(kind, smiles):
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return f"{kind}\t{smiles}\tinvalid"
    formula = rdMolDescriptors.CalcMolFormula(mol)
    return f"{kind}\t{smiles}\t{formula}\t{mol.GetNumAtoms()}\t{Descriptors.MolWt(mol):.5f}"


def read_source(root, path, how):
    full = root / path
    if how == "sdf":
        for mol in Chem.SDMolSupplier(str(full)):
            if mol is not None:
                yield Chem.MolToSmiles(mol)
        return
    opener = gzip.open if path.endswith(".gz") else open
    with opener(full, "rt") as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            yield fields[-1] if how == "smi-named" else fields[0]


def real_molecules(root):
    seen = set()
    for name, path, how in SOURCES:
        for smiles in read_source(root, path, how):
            # `\\` in the ZINC files is a doubled backslash, which RDKit reads as one.
            if smiles in seen or "\t" in smiles or Chem.MolFromSmiles(smiles) is None:
                continue
            seen.add(smiles)
            yield name, smiles


def spans(smiles, pattern):
    """(start, end) of each token of `smiles` matching `pattern`."""
    return [(m.start(), m.end()) for m in TOKEN.finditer(smiles) if pattern.fullmatch(m.group())]


def replace(smiles, span, text):
    return smiles[: span[0]] + text + smiles[span[1]:]


def atom_symbol(token):
    """The element part of an atom token, bracketed or not, and whether it was bracketed."""
    if token.startswith("["):
        m = re.fullmatch(r"\[([0-9]*)(\*|[A-Z][a-z]?|[a-z]{1,2})(.*)\]", token)
        return (m.group(2), True) if m else (None, True)
    return token, False


def bracketed(token, isotope="", stereo="", hydrogens="", charge=""):
    symbol, _ = atom_symbol(token)
    if symbol is None:
        return None
    return f"[{isotope}{symbol}{stereo}{hydrogens}{charge}]"


def m_delete(r, s):
    i = r.randrange(len(s))
    return s[:i] + s[i + 1:]


def m_duplicate(r, s):
    i = r.randrange(len(s))
    return s[: i + 1] + s[i:]


def m_swap(r, s):
    if len(s) < 2:
        return None
    i = r.randrange(len(s) - 1)
    return s[:i] + s[i + 1] + s[i] + s[i + 2:]


def m_insert_noise(r, s):
    i = r.randrange(len(s) + 1)
    return s[:i] + r.choice(NOISE) + s[i:]


def m_ring_digit_double(r, s):
    rings = spans(s, RING)
    if not rings:
        return None
    a, b = r.choice(rings)
    return s[:b] + s[a:b] + s[b:]


def m_ring_digit_change(r, s):
    rings = spans(s, RING)
    if not rings:
        return None
    return replace(s, r.choice(rings), r.choice("0123456789"))


def m_percent(r, s):
    rings = [sp for sp in spans(s, RING) if len(s[sp[0]:sp[1]]) == 1]
    if not rings:
        return None
    digit = s[rings[0][0]]
    forms = [f"%0{digit}", f"%1{digit}", f"%({digit})", f"%({r.randrange(100, 100000)})", f"%9{digit}",
             f"%(0{digit})", f"%{digit}"]
    form = r.choice(forms)
    partners = [sp for sp in rings if s[sp[0]] == digit]
    # Rewrite both ends of one closure (the first two uses of the digit), or only one.
    chosen = partners[:2] if r.random() < 0.8 else partners[:1]
    for sp in reversed(chosen):
        s = replace(s, sp, form)
    return s


def m_bond(r, s):
    toks = list(TOKEN.finditer(s))
    gaps = [t.end() for t, u in zip(toks, toks[1:]) if ATOM.fullmatch(t.group()) or RING.fullmatch(t.group())
            if ATOM.fullmatch(u.group()) or RING.fullmatch(u.group())]
    existing = spans(s, BOND)
    if existing and (not gaps or r.random() < 0.5):
        return replace(s, r.choice(existing), r.choice(BONDS + [""]))
    if not gaps:
        return None
    i = r.choice(gaps)
    return s[:i] + r.choice(BONDS) + s[i:]


def m_aromatic_bond(r, s):
    toks = list(TOKEN.finditer(s))
    gaps = [t.end() for t, u in zip(toks, toks[1:]) if ATOM.fullmatch(t.group()) and ATOM.fullmatch(u.group())]
    if not gaps:
        return None
    i = r.choice(gaps)
    return s[:i] + r.choice([":", ":", "~"]) + s[i:]


def m_kekule_bond(r, s):
    """A double or triple bond written between two aromatic atoms, or at a ring closure."""
    toks = list(TOKEN.finditer(s))
    gaps = [t.end() for t, u in zip(toks, toks[1:])
            if (t.group().islower() or RING.fullmatch(t.group())) and (u.group().islower() or RING.fullmatch(u.group()))]
    if not gaps:
        return None
    i = r.choice(gaps)
    return s[:i] + r.choice(["=", "=", "#"]) + s[i:]


def m_case(r, s):
    letters = [i for i, c in enumerate(s) if c.isalpha() and c not in "HlrI"]
    if not letters:
        return None
    i = r.choice(letters)
    return s[:i] + s[i].swapcase() + s[i + 1:]


def pick_atom(r, s):
    atoms = spans(s, ATOM)
    return r.choice(atoms) if atoms else None


def m_charge(r, s):
    sp = pick_atom(r, s)
    if sp is None:
        return None
    token = s[sp[0]:sp[1]]
    if token.startswith("[") and r.random() < 0.5:
        return replace(s, sp, token[:-1] + r.choice(CHARGES) + "]")
    h = r.choice(["", "", "H", "H2", "H3"])
    new = bracketed(token, hydrogens=h, charge=r.choice(CHARGES))
    return replace(s, sp, new) if new else None


def m_isotope(r, s):
    sp = pick_atom(r, s)
    if sp is None:
        return None
    token = s[sp[0]:sp[1]]
    h = r.choice(["", "H", "H2", "H3"])
    new = bracketed(token, isotope=r.choice(ISOTOPES), hydrogens=h)
    return replace(s, sp, new) if new else None


def m_stereo(r, s):
    if r.random() < 0.4:
        toks = list(TOKEN.finditer(s))
        gaps = [t.end() for t in toks if ATOM.fullmatch(t.group())]
        if not gaps:
            return None
        i = r.choice(gaps)
        return s[:i] + r.choice(["/", "\\", "\\\\", "//"]) + s[i:]
    sp = pick_atom(r, s)
    if sp is None:
        return None
    token = s[sp[0]:sp[1]]
    new = bracketed(token, stereo=r.choice(STEREO), hydrogens=r.choice(["", "H", "H2"]))
    return replace(s, sp, new) if new else None


def m_hydrogen(r, s):
    sp = pick_atom(r, s)
    if sp is None:
        return None
    token = s[sp[0]:sp[1]]
    choice = r.random()
    if choice < 0.4:
        new = bracketed(token, hydrogens=r.choice(["H", "H2", "H3", "H4", "H0", "H1"]))
        return replace(s, sp, new) if new else None
    if choice < 0.7:
        return s[: sp[1]] + r.choice(["([H])", "[H]", "([2H])", "([H+])", "([H-])"]) + s[sp[1]:]
    return s[: sp[0]] + r.choice(["[H]", "[2H]"]) + s[sp[0]:]


def m_dot(r, s):
    choice = r.random()
    if choice < 0.4:
        i = r.randrange(len(s) + 1)
        return s[:i] + "." + s[i:]
    if choice < 0.7:
        return s + r.choice([".[Na+]", ".Cl", ".[Cl-]", ".O", ".[K+].[K+]", ".[H]", "."])
    return r.choice(["[Na+].", "O.", "."]) + s


def m_metal(r, s):
    sp = pick_atom(r, s)
    if sp is None:
        return None
    metal = r.choice(METALS)
    if r.random() < 0.5:
        return replace(s, sp, metal)
    return s[: sp[1]] + f"({metal})" + s[sp[1]:]


def m_element(r, s):
    candidates = [sp for sp in spans(s, ATOM) if s[sp[0]:sp[1]] in ELEMENT_SWAPS]
    if not candidates:
        return None
    sp = r.choice(candidates)
    return replace(s, sp, r.choice(ELEMENT_SWAPS[s[sp[0]:sp[1]]]))


def m_whitespace(r, s):
    choice = r.random()
    if choice < 0.3:
        return s + r.choice([" title", " 12", "  CHEMBL25", " "])
    if choice < 0.5:
        return r.choice([" ", "  "]) + s
    i = r.randrange(1, len(s)) if len(s) > 1 else 1
    return s[:i] + " " + s[i:]


def m_branch(r, s):
    toks = list(TOKEN.finditer(s))
    parens = [(t.start(), t.end()) for t in toks if t.group() in "()"]
    if parens and r.random() < 0.6:
        return replace(s, r.choice(parens), r.choice(["", "((", "))", "()", "(", ")"]))
    i = r.randrange(len(s) + 1)
    return s[:i] + r.choice(["(", ")", "()", "(C)", "(=O)"]) + s[i:]


KINDS = {
    "delete": m_delete,
    "duplicate": m_duplicate,
    "swap": m_swap,
    "noise": m_insert_noise,
    "ring-digit-double": m_ring_digit_double,
    "ring-digit-change": m_ring_digit_change,
    "percent": m_percent,
    "bond": m_bond,
    "aromatic-bond": m_aromatic_bond,
    "kekule-bond": m_kekule_bond,
    "case": m_case,
    "charge": m_charge,
    "isotope": m_isotope,
    "stereo": m_stereo,
    "hydrogen": m_hydrogen,
    "dot": m_dot,
    "metal": m_metal,
    "element": m_element,
    "whitespace": m_whitespace,
    "branch": m_branch,
}


def mutations(molecules):
    r = random.Random(SEED)
    names = sorted(KINDS)
    seen = {s for _, s in molecules}
    produced = 0
    attempts = 0
    while produced < MUTATIONS and attempts < MUTATIONS * 20:
        attempts += 1
        _, smiles = r.choice(molecules)
        kinds = [r.choice(names)] if r.random() < 0.75 else [r.choice(names), r.choice(names)]
        mutated = smiles
        for kind in kinds:
            mutated = KINDS[kind](r, mutated) if mutated else None
        if not mutated or mutated in seen or "\t" in mutated or "\n" in mutated:
            continue
        seen.add(mutated)
        produced += 1
        yield "mut/" + "+".join(kinds), mutated


def main():
    global SEED, MUTATIONS
    root = Path(sys.argv[1])
    # Optional: another seed and count, to measure on cases the plugin was not tuned on.
    if len(sys.argv) > 2:
        SEED, MUTATIONS = int(sys.argv[2]), int(sys.argv[3])
    molecules = list(real_molecules(root))
    print(f"# RDKit {rdBase.rdkitVersion}'s verdict on real and mutated SMILES; made by")
    print("# plugins/chem/tools/make_rdkit_cases.py (see its docstring for the command); do not edit.")
    print("# kind\tsmiles\tinvalid | formula\tatom_count\tmol_wt")
    for smiles in HARD:
        print(rdkit_row("hard", smiles))
    for name, smiles in molecules:
        print(rdkit_row(f"real/{name}", smiles))
    for kind, smiles in mutations(molecules):
        print(rdkit_row(kind, smiles))


main()
