#!/usr/bin/env python3
"""Writes evals/everyday.jsonl or a held-out set (evals/heldout*.jsonl): each task's expected
value is computed by the real tools.

Each task below names the calls a right run makes (its reference solution). This script runs
those calls through the harness binary (`harness run --script`, one call per run, the result
read back from the trace), computes the expected answer from the results, and writes one task
line with the reference solution as its `script` (calls, then `finish` with the answer), so
that `harness eval evals/everyday.jsonl --provider scripted` replays it and must score every
task right.

    python3 evals/make_everyday.py --harness target/debug/harness --plugins-dir target/debug > evals/everyday.jsonl
    python3 evals/make_everyday.py --set heldout > evals/heldout.jsonl
    python3 evals/make_everyday.py --set heldout2 > evals/heldout2.jsonl
    python3 evals/make_everyday.py --set heldout3 > evals/heldout3.jsonl
    python3 evals/make_everyday.py --set heldout4 > evals/heldout4.jsonl
    python3 evals/make_everyday.py --set heldout5 > evals/heldout5.jsonl

The held-out set (`--set heldout`) was written at c11527f, after the harness's small-model
changes until then, and measured as it was written. A change tuned on it makes it one more
suite. On 2026-12-07 it decided two changes (docs/eval.md says which), so a second one
(`--set heldout2`) was written that day at c5184ed, before any run of it. It became the check of
four changes, and a third (`--set heldout3`) was written after d5cd4b5, before any run of it.
Once the third had been run and its failures read, a fourth (`--set heldout4`) was written at
3a7a84e, before any run of it and before the changes it checks. A fifth (`--set heldout5`) was
written at 123ed58, before any run of it, once the fourth had been run twice.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def calc(expression):
    return ("calculate", {"expression": expression})


def mw(smiles):
    return ("molecular_weight", {"smiles": smiles})


def valid(smiles):
    return ("validate_smiles", {"smiles": smiles})


def first(results):
    return results[0]


def weight(i):
    return lambda r: r[i]["molecular_weight"]


def yes_if(test):
    return lambda r: "yes" if test(r) else "no"


# (id, request, reference calls (a list; an entry may be a function of the earlier results),
#  how the answer comes from the results, the expect kind, extra expect fields)
EVERYDAY = [
    # Arithmetic as people write it: one calculate.
    ("calc-readme", "calculate 6*7", [calc("6*7")], first, "number", {}),
    ("percent-of", "what's 15% of 80?", [calc("15/100*80")], first, "number", {}),
    ("add", "What is 1234 + 5678?", [calc("1234+5678")], first, "number", {}),
    ("times", "how much is 12 times 17", [calc("12*17")], first, "number", {}),
    ("divide", "what's 144 divided by 12", [calc("144/12")], first, "number", {}),
    ("sqrt", "square root of 2025?", [calc("sqrt(2025)")], first, "number", {}),
    ("power", "What is 2 to the power of 10?", [calc("2^10")], first, "number", {}),
    ("seventeen-percent", "what is 17 percent of 2340", [calc("17/100*2340")], first, "number", {}),
    ("hours-in-year", "How many hours are in a year of 365 days?", [calc("365*24")], first, "number", {}),
    ("seconds-in-day", "How many seconds are in a day?", [calc("24*60*60")], first, "number", {}),
    ("squared", "What is 3.5 squared?", [calc("3.5^2")], first, "number", {}),
    ("round", "round 2/3 to 2 decimal places", [calc("round(2/3, 2)")], first, "number", {}),
    ("circle-area", "area of a circle with radius 3", [calc("pi*3^2")], first, "number", {"tolerance": 0.01}),
    ("average", "What's the average of 12, 15 and 21?", [calc("(12+15+21)/3")], first, "number", {}),
    ("percent-change", "What is the percentage change from 80 to 100?", [calc("(100-80)/80*100")], first, "number", {}),
    # Word problems: still one calculate.
    ("split-bill", "If I split an $85 bill among 4 people, how much does each pay?", [calc("85/4")], first, "number", {}),
    ("discount", "A shirt costs $40 and is 25% off. What's the sale price?", [calc("40*(1-25/100)")], first, "number", {}),
    ("sales-tax", "What is 7% sales tax on $250?", [calc("7/100*250")], first, "number", {}),
    ("fahrenheit", "convert 100 fahrenheit to celsius", [calc("(100-32)*5/9")], first, "number", {"tolerance": 0.01}),
    ("mpg", "I drove 150 miles on 5 gallons. How many miles per gallon is that?", [calc("150/5")], first, "number", {}),
    ("train", "A train travels at 60 km/h for 2.5 hours. How far does it go, in km?", [calc("60*2.5")], first, "number", {}),
    ("compound", "I put $1000 in a savings account at 5% interest compounded yearly. How much is there after 3 years?", [calc("1000*1.05^3")], first, "number", {"tolerance": 0.01}),
    ("eggs", "How much do 3 dozen eggs cost at $0.25 each?", [calc("3*12*0.25")], first, "number", {}),
    ("apples", "I had 120 apples and gave away 3/8 of them. How many are left?", [calc("120-120*3/8")], first, "number", {}),
    ("tip-plus", "what's 20% of 45, plus 3?", [calc("20/100*45+3")], first, "number", {}),
    # Yes or no from a calculation.
    ("divisible", "Is 391 divisible by 17?", [calc("391 % 17")], yes_if(lambda r: r[0] == 0), "yes_no", {}),
    ("million", "Is 2^20 more than a million?", [calc("2^20")], yes_if(lambda r: r[0] > 1_000_000), "yes_no", {}),
    # Is a SMILES string valid: one validate_smiles.
    ("valid-ethanol", "is CCO a valid SMILES?", [valid("CCO")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-open-ring", "Is C1CC a valid SMILES string?", [valid("C1CC")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-benzene", "check whether c1ccccc1 is a valid SMILES", [valid("c1ccccc1")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-pentavalent", "Is this SMILES valid: C(C)(C)(C)(C)C", [valid("C(C)(C)(C)(C)C")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-acetic", "Is CC(=O)O valid SMILES?", [valid("CC(=O)O")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-acrylic", "Is OC(=O)C=C a valid SMILES?", [valid("OC(=O)C=C")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-five-ring", "is c1cccc1 valid as a SMILES?", [valid("c1cccc1")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-garbage", "Is Xx a valid SMILES?", [valid("Xx")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("atoms-ethanol", "How many heavy atoms does the SMILES CCO have?", [valid("CCO")], lambda r: r[0]["atom_count"], "number", {}),
    ("formula-caffeine", "What's the molecular formula of caffeine, Cn1cnc2c1c(=O)n(C)c(=O)n2C?", [valid("Cn1cnc2c1c(=O)n(C)c(=O)n2C")], lambda r: r[0]["formula"], "text", {}),
    # Molecular weights: one molecular_weight.
    ("mw-aspirin", "molecular weight of aspirin CC(=O)Oc1ccccc1C(=O)O", [mw("CC(=O)Oc1ccccc1C(=O)O")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-ethanol", "What's the molar mass of ethanol (CCO)?", [mw("CCO")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-water", "How much does water, O, weigh in g/mol?", [mw("O")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-benzene", "molecular weight of benzene c1ccccc1", [mw("c1ccccc1")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-glucose", "What's the molecular weight of glucose, OCC1OC(O)C(O)C(O)C1O?", [mw("OCC1OC(O)C(O)C(O)C1O")], weight(0), "number", {"tolerance": 0.01}),
    ("formula-acetic", "What is the molecular formula of CC(=O)O?", [mw("CC(=O)O")], lambda r: r[0]["formula"], "text", {}),
    # Chains: a result feeds the next call.
    ("grams-water", "What do 3 moles of water (SMILES O) weigh, in grams?", [mw("O"), lambda r: calc(f"3*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("half-mol-aspirin", "How many grams is 0.5 mol of aspirin, CC(=O)Oc1ccccc1C(=O)O?", [mw("CC(=O)Oc1ccccc1C(=O)O"), lambda r: calc(f"0.5*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("valid-then-weight", "If CCO is a valid SMILES, what is its molecular weight?", [valid("CCO"), mw("CCO")], weight(1), "number", {"tolerance": 0.01}),
    ("sum-weights", "What is the combined molecular weight of ethanol (CCO) and water (O)?", [mw("CCO"), mw("O"), lambda r: calc(f"{r[0]['molecular_weight']}+{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
    ("heavier", "How much heavier is aspirin (CC(=O)Oc1ccccc1C(=O)O) than benzene (c1ccccc1), in g/mol?", [mw("CC(=O)Oc1ccccc1C(=O)O"), mw("c1ccccc1"), lambda r: calc(f"{r[0]['molecular_weight']}-{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
]


# Requests the small-model changes were never tuned on: written in one go on 2026-12-07, after
# them, phrased as people ask, over the same tools and of the same kinds.
HELDOUT = [
    ("sum-plain", "what is 250 + 175?", [calc("250+175")], first, "number", {}),
    ("multiply-by", "multiply 48 by 23", [calc("48*23")], first, "number", {}),
    ("divided-how-much", "how much is 900 divided by 36?", [calc("900/36")], first, "number", {}),
    ("percent-of-350", "what's 12% of 350?", [calc("12/100*350")], first, "number", {}),
    ("nine-squared", "What is 9 squared?", [calc("9^2")], first, "number", {}),
    ("cube-root", "cube root of 27", [calc("27^(1/3)")], first, "number", {"tolerance": 0.01}),
    ("minutes", "How many minutes are in 6 hours?", [calc("6*60")], first, "number", {}),
    ("pizza", "If a pizza costs $18 and we are 3 people, how much does each person pay?", [calc("18/3")], first, "number", {}),
    ("eighth-power", "What is 2 to the 8th power?", [calc("2^8")], first, "number", {}),
    ("half-off", "A book costs $24 and is 50% off. How much do I pay?", [calc("24*(1-50/100)")], first, "number", {}),
    ("walk-week", "I walk 4 km every day. How far do I walk in a week?", [calc("4*7")], first, "number", {}),
    ("minus", "what's 1000 minus 387", [calc("1000-387")], first, "number", {}),
    ("multiple", "Is 97 a multiple of 7?", [calc("97 % 7")], yes_if(lambda r: r[0] == 0), "yes_no", {}),
    ("bigger", "Is 3 to the power of 5 bigger than 200?", [calc("3^5")], yes_if(lambda r: r[0] > 200), "yes_no", {}),
    ("valid-ethylamine", "Is CCN a valid SMILES?", [valid("CCN")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-unclosed", "is C1CCC valid SMILES?", [valid("C1CCC")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-nitrogen", "Is N#N a valid SMILES string?", [valid("N#N")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("atoms-hexane", "How many heavy atoms are in CCCCCC?", [valid("CCCCCC")], lambda r: r[0]["atom_count"], "number", {}),
    ("mw-methane", "What's the molecular weight of methane, C?", [mw("C")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-butane", "molar mass of butane CCCC", [mw("CCCC")], weight(0), "number", {"tolerance": 0.01}),
    ("formula-ester", "What is the molecular formula of CCOC(=O)C?", [mw("CCOC(=O)C")], lambda r: r[0]["formula"], "text", {}),
    ("mw-ammonia", "What's the molecular weight of ammonia (N)?", [mw("N")], weight(0), "number", {"tolerance": 0.01}),
    ("grams-ethanol", "How many grams do 2 moles of ethanol (CCO) weigh?", [mw("CCO"), lambda r: calc(f"2*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("sum-methane-ammonia", "What is the combined molecular weight of methane (C) and ammonia (N)?", [mw("C"), mw("N"), lambda r: calc(f"{r[0]['molecular_weight']}+{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
]


# A second held-out set, written in one go on 2026-12-07 at c5184ed, after the first had decided
# two changes, and measured as it was written: same tools, same kinds, same share of chains, no
# request of the suite, of the first held-out set or of a plugin's worked examples.
HELDOUT2 = [
    ("add-two", "add 2468 and 1357", [calc("2468+1357")], first, "number", {}),
    ("times-words", "what's 64 times 15", [calc("64*15")], first, "number", {}),
    ("share-candies", "I have 156 candies to share equally among 12 kids. How many does each kid get?", [calc("156/12")], first, "number", {}),
    ("percent-of-640", "What is 35% of 640?", [calc("35/100*640")], first, "number", {}),
    ("sqrt-196", "what's the square root of 196", [calc("sqrt(196)")], first, "number", {}),
    ("seconds-hours", "How many seconds are in 3 hours?", [calc("3*60*60")], first, "number", {}),
    ("wage", "I earn $22 an hour and work 38 hours a week. How much do I earn in a week?", [calc("22*38")], first, "number", {}),
    ("cubed", "What is 7 cubed?", [calc("7^3")], first, "number", {}),
    ("sale-jacket", "A jacket is $120 and it's 30% off. What do I pay?", [calc("120*(1-30/100)")], first, "number", {}),
    ("speed", "A car goes 240 km in 3 hours. What is its average speed in km/h?", [calc("240/3")], first, "number", {}),
    ("subtract-from", "subtract 1234 from 5000", [calc("5000-1234")], first, "number", {}),
    ("divisible-nine", "Is 144 divisible by 9?", [calc("144 % 9")], yes_if(lambda r: r[0] == 0), "yes_no", {}),
    ("more-than", "Is 5 to the power of 4 more than 600?", [calc("5^4")], yes_if(lambda r: r[0] > 600), "yes_no", {}),
    ("mean-four", "what is the mean of 10, 20, 30 and 60?", [calc("(10+20+30+60)/4")], first, "number", {}),
    ("centimeters", "How many centimeters are in 3.5 meters?", [calc("3.5*100")], first, "number", {}),
    ("valid-hexane", "is CCCCCC a valid SMILES?", [valid("CCCCCC")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-stray-paren", "Is CC)C a valid SMILES string?", [valid("CC)C")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("atoms-ether", "How many heavy atoms are in CCOCC?", [valid("CCOCC")], lambda r: r[0]["atom_count"], "number", {}),
    ("mw-methanol", "What is the molecular weight of methanol, CO?", [mw("CO")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-toluene", "molar mass of toluene Cc1ccccc1", [mw("Cc1ccccc1")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-isobutane", "What's the molar mass of isobutane CC(C)C?", [mw("CC(C)C")], weight(0), "number", {"tolerance": 0.01}),
    ("formula-acetaldehyde", "What's the molecular formula of CC=O?", [mw("CC=O")], lambda r: r[0]["formula"], "text", {}),
    ("grams-methanol", "How many grams do 4 moles of methanol (CO) weigh?", [mw("CO"), lambda r: calc(f"4*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("sum-methanol-ethanol", "What is the total molecular weight of methanol (CO) and ethanol (CCO)?", [mw("CO"), mw("CCO"), lambda r: calc(f"{r[0]['molecular_weight']}+{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
]

# A third held-out set, written in one go on 2026-12-07 after 961de37 and d5cd4b5 (calc's mean(),
# percentages in the request's words) and measured as it was written: the second had been the
# check of four changes and its requests had been seen. Same tools, same kinds, same share of
# chains; no request of the suite, of the other held-out sets or of a plugin's worked examples.
HELDOUT3 = [
    ("plus-words", "what's 389 plus 1278", [calc("389+1278")], first, "number", {}),
    ("times-product", "What do you get when you multiply 37 by 19?", [calc("37*19")], first, "number", {}),
    ("stickers", "I have 250 stickers to split evenly into 10 albums. How many go in each album?", [calc("250/10")], first, "number", {}),
    ("percent-of-440", "What is 18% of 440?", [calc("18/100*440")], first, "number", {}),
    ("sqrt-324", "square root of 324", [calc("sqrt(324)")], first, "number", {}),
    ("minutes-hours", "How many minutes are in 2.5 hours?", [calc("2.5*60")], first, "number", {}),
    ("tickets", "Tickets cost $14 each. How much do 9 tickets cost?", [calc("9*14")], first, "number", {}),
    ("four-power", "What is 4 to the power of 5?", [calc("4^5")], first, "number", {}),
    ("shoes-off", "A $60 pair of shoes is 20% off. What's the new price?", [calc("60*(1-20/100)")], first, "number", {}),
    ("train-mph", "A train travels 180 miles in 4 hours. What is its speed in miles per hour?", [calc("180/4")], first, "number", {}),
    ("take-away", "take 475 away from 2000", [calc("2000-475")], first, "number", {}),
    ("divisible-thirteen", "Is 221 divisible by 13?", [calc("221 % 13")], yes_if(lambda r: r[0] == 0), "yes_no", {}),
    ("bigger-than", "Is 3 to the power of 7 bigger than 2000?", [calc("3^7")], yes_if(lambda r: r[0] > 2000), "yes_no", {}),
    ("average-four", "What's the average of 7, 11, 15 and 19?", [calc("(7+11+15+19)/4")], first, "number", {}),
    ("millimeters", "How many millimeters are in 7.5 centimeters?", [calc("7.5*10")], first, "number", {}),
    ("valid-pyridine", "is c1ccncc1 a valid SMILES?", [valid("c1ccncc1")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-open-branch", "Is CC(=O a valid SMILES string?", [valid("CC(=O")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("atoms-butanol", "How many heavy atoms does CCCCO have?", [valid("CCCCO")], lambda r: r[0]["atom_count"], "number", {}),
    ("mw-cyclohexane", "What is the molecular weight of cyclohexane, C1CCCCC1?", [mw("C1CCCCC1")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-phenol", "molar mass of phenol Oc1ccccc1", [mw("Oc1ccccc1")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-propene", "What's the molar mass of propene C=CC?", [mw("C=CC")], weight(0), "number", {"tolerance": 0.01}),
    ("formula-glycol", "What's the molecular formula of OCCO?", [mw("OCCO")], lambda r: r[0]["formula"], "text", {}),
    ("grams-acetic", "How many grams do 3 moles of acetic acid (CC(=O)O) weigh?", [mw("CC(=O)O"), lambda r: calc(f"3*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("sum-ethane-ammonia", "What is the total molecular weight of ethane (CC) and ammonia (N)?", [mw("CC"), mw("N"), lambda r: calc(f"{r[0]['molecular_weight']}+{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
]

# A fourth held-out set, written in one go on 2026-12-07 at 3a7a84e, before the session's first
# change and before any run of it: the third had been run and its failures read. Same tools,
# same kinds, same share of chains; no request of the suite, of the other held-out sets or of a
# plugin's worked examples.
HELDOUT4 = [
    ("minus-words", "what is 1234 minus 567", [calc("1234-567")], first, "number", {}),
    ("times-how-much", "How much is 45 times 12?", [calc("45*12")], first, "number", {}),
    ("taxi-fare", "Five friends share a $95 taxi fare equally. How much does each pay?", [calc("95/5")], first, "number", {}),
    ("percent-of-260", "What is 35% of 260?", [calc("35/100*260")], first, "number", {}),
    ("sqrt-441", "What is the square root of 441?", [calc("sqrt(441)")], first, "number", {}),
    ("seconds-minutes", "How many seconds are in 15 minutes?", [calc("15*60")], first, "number", {}),
    ("books", "A book costs $12. How much do 7 books cost?", [calc("7*12")], first, "number", {}),
    ("six-cubed", "What is 6 cubed?", [calc("6^3")], first, "number", {}),
    ("jacket-off", "A $120 jacket is 30% off. How much does it cost now?", [calc("120*(1-30/100)")], first, "number", {}),
    ("cyclist", "A cyclist rides 60 km in 2.5 hours. What is her average speed in km/h?", [calc("60/2.5")], first, "number", {}),
    ("meters-kilometers", "How many meters are in 4.2 kilometers?", [calc("4.2*1000")], first, "number", {}),
    ("divisible-seven", "Is 119 divisible by 7?", [calc("119 % 7")], yes_if(lambda r: r[0] == 0), "yes_no", {}),
    ("less-than", "Is 2 to the power of 12 less than 5000?", [calc("2^12")], yes_if(lambda r: r[0] < 5000), "yes_no", {}),
    ("average-three", "What's the average of 12, 18 and 27?", [calc("(12+18+27)/3")], first, "number", {}),
    ("tip-bill", "add a 15% tip to a $40 bill", [calc("40*1.15")], first, "number", {}),
    ("divide-by", "divide 1000 by 8", [calc("1000/8")], first, "number", {}),
    ("valid-acrylic", "Is OC(=O)C=C a valid SMILES?", [valid("OC(=O)C=C")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("valid-unclosed", "Is N1CC a valid SMILES string?", [valid("N1CC")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("atoms-hexane", "How many heavy atoms are in CCCCCC?", [valid("CCCCCC")], lambda r: r[0]["atom_count"], "number", {}),
    ("mw-toluene", "What is the molecular weight of toluene, Cc1ccccc1?", [mw("Cc1ccccc1")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-butane", "molar mass of butane CCCC", [mw("CCCC")], weight(0), "number", {"tolerance": 0.01}),
    ("formula-ethylamine", "What's the molecular formula of CCN?", [mw("CCN")], lambda r: r[0]["formula"], "text", {}),
    ("grams-benzene", "How many grams do 2 moles of benzene (c1ccccc1) weigh?", [mw("c1ccccc1"), lambda r: calc(f"2*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("sum-co2-water", "What is the total molecular weight of carbon dioxide (O=C=O) and water (O)?", [mw("O=C=O"), mw("O"), lambda r: calc(f"{r[0]['molecular_weight']}+{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
]

HELDOUT5 = [
    ("added-together", "what's 2048 and 999 added together", [calc("2048+999")], first, "number", {}),
    ("multiplied-by", "Compute 84 multiplied by 15", [calc("84*15")], first, "number", {}),
    ("rent-split", "Three roommates split $960 rent equally. What does each pay?", [calc("960/3")], first, "number", {}),
    ("percent-of-180", "What is 45% of 180?", [calc("45/100*180")], first, "number", {}),
    ("sqrt-729", "square root of 729", [calc("sqrt(729)")], first, "number", {}),
    ("grams-kilograms", "How many grams are in 3.2 kilograms?", [calc("3.2*1000")], first, "number", {}),
    ("bus-passes", "One bus pass costs $23. What do 4 passes cost?", [calc("4*23")], first, "number", {}),
    ("five-fourth-power", "What is 5 raised to the 4th power?", [calc("5^4")], first, "number", {}),
    ("phone-sale", "A $250 phone is 40% off. What does it cost now?", [calc("250*(1-40/100)")], first, "number", {}),
    ("boat-speed", "A boat goes 90 km in 2 hours. How fast is it in km/h?", [calc("90/2")], first, "number", {}),
    ("feet-yards", "How many feet are in 9 yards?", [calc("9*3")], first, "number", {}),
    ("evenly-divides", "Does 16 go evenly into 432?", [calc("432 % 16")], yes_if(lambda r: r[0] == 0), "yes_no", {}),
    ("greater-than", "Is 9 squared greater than 80?", [calc("9^2")], yes_if(lambda r: r[0] > 80), "yes_no", {}),
    ("mean-three", "Find the mean of 14, 22 and 36", [calc("(14+22+36)/3")], first, "number", {}),
    ("tax-added", "add 8% sales tax to $25", [calc("25*1.08")], first, "number", {}),
    ("divide-756", "divide 756 by 12", [calc("756/12")], first, "number", {}),
    ("valid-acetamide", "Is CC(=O)N a valid SMILES?", [valid("CC(=O)N")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("syntax-ring", "Does OC1CCC have valid SMILES syntax?", [valid("OC1CCC")], yes_if(lambda r: r[0]["valid"]), "yes_no", {}),
    ("count-isobutanol", "Count the heavy atoms in CC(C)CO", [valid("CC(C)CO")], lambda r: r[0]["atom_count"], "number", {}),
    ("mw-pyridine", "What is the molecular weight of pyridine, c1ccncc1?", [mw("c1ccncc1")], weight(0), "number", {"tolerance": 0.01}),
    ("mw-propane", "molar mass of propane CCC", [mw("CCC")], weight(0), "number", {"tolerance": 0.01}),
    ("formula-glycine", "Give me the molecular formula of NCC(=O)O", [mw("NCC(=O)O")], lambda r: r[0]["formula"], "text", {}),
    ("grams-acetone", "What is the mass of 4 moles of acetone (CC(C)=O) in grams?", [mw("CC(C)=O"), lambda r: calc(f"4*{r[0]['molecular_weight']}")], lambda r: r[1], "number", {"tolerance": 0.05}),
    ("sum-nitrogen-oxygen", "Add the molecular weights of nitrogen (N#N) and oxygen (O=O).", [mw("N#N"), mw("O=O"), lambda r: calc(f"{r[0]['molecular_weight']}+{r[1]['molecular_weight']}")], lambda r: r[2], "number", {"tolerance": 0.05}),
]

SETS = {"everyday": EVERYDAY, "heldout": HELDOUT, "heldout2": HELDOUT2, "heldout3": HELDOUT3, "heldout4": HELDOUT4, "heldout5": HELDOUT5}


def call_tool(harness, plugins_dir, tool, arguments):
    """Runs one call through the harness with the scripted provider; returns its result."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "script.jsonl")
        trace = os.path.join(tmp, "trace.jsonl")
        with open(script, "w") as f:
            f.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
            f.write(json.dumps({"tool": "finish", "arguments": {"answer": None}}) + "\n")
        cmd = [harness, "run", "reference", "--script", script, "--trace", trace, "--json", "-q",
               "--no-default-plugins", "--plugins-dir", plugins_dir]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(trace) as f:
            steps = [json.loads(line) for line in f]
        step = next(s for s in steps if "kind" not in s and s.get("tool") == tool)
        if step.get("status") != "ok":
            sys.exit(f"{tool} {arguments}: {step.get('error')}")
        return step["result"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--harness", default="target/debug/harness")
    parser.add_argument("--plugins-dir", default="target/debug")
    parser.add_argument("--set", choices=sorted(SETS), default="everyday")
    args = parser.parse_args()
    for task_id, request, calls, answer_of, kind, extra in SETS[args.set]:
        results, script, tools = [], [], []
        for call in calls:
            tool, arguments = call(results) if callable(call) else call
            results.append(call_tool(args.harness, args.plugins_dir, tool, arguments))
            script.append({"tool": tool, "arguments": arguments})
            if tool not in tools:
                tools.append(tool)
        answer = answer_of(results)
        script.append({"tool": "finish", "arguments": {"answer": answer}})
        expect = {kind: answer, **extra}
        line = {"id": task_id, "request": request, "expect": expect, "tools": tools, "steps": len(calls), "script": script}
        print(json.dumps(line))


if __name__ == "__main__":
    main()
