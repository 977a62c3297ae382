//! The notation, row by row: what a user expects from each expression (the expressions models
//! write most first), and for each mistake, the column and the words of its error.

use calc::calculate;

/// The answer as the model sees it: JSON text.
fn shown(expression: &str) -> String {
    match calculate(expression) {
        Ok(answer) => harness_sdk::serde_json::to_string(&answer).expect("an answer is JSON"),
        Err(e) => format!("error: {}", e.message),
    }
}

#[test]
fn every_expression_gives_what_a_user_expects() {
    let rows = [
        // What models write most: true division, `^` and `**`, the usual functions, exact big integers.
        ("17/100*2340", "397.8"),
        ("10/4", "2.5"),
        ("-5/2", "-2.5"),
        ("2^10", "1024"),
        ("2**10", "1024"),
        ("sqrt(2)", "1.4142135623730951"),
        ("sin(0)", "0"),
        ("pi", "3.141592653589793"),
        // Past 64 bits an exact integer is a string of its digits: a JSON number would be rounded.
        ("9999999999*9999999999", "\"99999999980000000001\""),
        // Exact fractions and decimals.
        ("1/3*3", "1"),
        ("0.1+0.2", "0.3"),
        ("1/3", "0.3333333333333333"),
        // Not exactly 1, so not the integer 1: the nearest float, written as one.
        ("(10^20+1)/10^20", "1.0"),
        ("(1.5 + 2) / 4", "0.875"),
        ("6*7", "42"),
        ("2/3 - 1/6", "0.5"),
        // Precedence and signs.
        ("-2^2", "-4"),
        ("(-2)^2", "4"),
        ("2^-1", "0.5"),
        ("2^3^2", "512"),
        ("2**3**2", "512"),
        ("5 - -3", "8"),
        ("2*-3", "-6"),
        ("1+2*3-4/2", "5"),
        ("+7", "7"),
        // Remainder: floored, the sign of the divisor.
        ("7 % 3", "1"),
        ("-7 % 3", "2"),
        ("7 % -3", "-2"),
        ("7.5 % 2", "1.5"),
        // A percentage, a currency sign and the two named powers, as people write them.
        ("17% of 2340", "397.8"),
        ("15 percent of 80", "12"),
        ("7% of $250", "17.5"),
        ("20% of 45 + 3", "12"),
        ("100 - 25% of 40", "90"),
        ("$85/4", "21.25"),
        ("€12.50 * 2", "25"),
        ("3.5 squared", "12.25"),
        ("2 cubed + 1", "9"),
        ("(1+2) squared", "9"),
        ("12 times 17", "204"),
        ("144 divided by 12", "12"),
        ("2 to the power of 10", "1024"),
        ("6 multiplied by 7 minus 2 plus 1", "41"),
        ("100 mod 7", "2"),
        ("100 modulo 7 + 1", "3"),
        ("3/4 of 120", "90"),
        ("2 of 3 of 4", "24"),
        ("square root of 64", "8"),
        ("square root of 64 + 1", "9"),
        ("square root(81)", "9"),
        ("cube root of 27", "3"),
        ("sqrt of 2^2", "2"),
        ("mean of 3, 5, 7, 9", "6"),
        ("average of 4, 9 and 20", "11"),
        ("mean of 4, 9, and 20", "11"),
        ("max of 2, 3*4", "12"),
        // Literals.
        ("1.5e3", "1500"),
        ("2.5E-1", "0.25"),
        ("1e-3", "0.001"),
        (".5 + 5.", "5.5"),
        ("1_000_000 * 3", "3000000"),
        ("2 × 3 ÷ 4 − 1", "0.5"),
        // Functions and constants.
        ("log(1000)", "3"),
        ("log(8, 2)", "3"),
        ("log(1000, 10)", "3"),
        ("log2(1/8)", "-3"),
        ("ln(e)", "1"),
        ("log(2)", "0.3010299956639812"),
        ("exp(1)", "2.718281828459045"),
        ("sqrt(16)", "4"),
        ("sqrt(9/4)", "1.5"),
        ("cbrt(-27)", "-3"),
        ("cbrt(2)", "1.2599210498948732"),
        ("abs(-3.5)", "3.5"),
        ("round(2.675, 2)", "2.68"),
        ("round(-2.5)", "-3"),
        ("round(1234, -2)", "1200"),
        ("round(pi, 4)", "3.1416"),
        ("floor(-2.5)", "-3"),
        ("ceil(2.1)", "3"),
        ("min(3, 1.5, 2)", "1.5"),
        ("max(3, pi, 2)", "3.141592653589793"),
        ("atan2(1, 1)*4", "3.141592653589793"),
        ("tau", "6.283185307179586"),
        ("cos(0) + tan(0) + asin(0) + acos(1) + atan(0)", "1"),
        ("sinh(0) + cosh(0) + tanh(0)", "1"),
        ("4^0.5", "2"),
        ("math::sqrt(16)", "4"),
        // Big and exact.
        ("2^100", "\"1267650600228229401496703205376\""),
        ("2^64 - 1", "18446744073709551615"),
        ("-2^63", "-9223372036854775808"),
        ("3^200 / 3^199", "3"),
        ("3^2500 / 3^2499", "3"),
        ("log(3^2500, 3)", "2500"),
        ("round(3^600/7^300, 2)", "5.537845401763783e+32"),
        ("round(2^-30, 12)", "9.31e-10"),
        ("1e308 * 10 / 1e308", "10"),
        // Exact, then rounded once: floats multiplied 365 times would give 54211841.577840365.
        ("1.05^365", "54211841.57783952"),
    ];
    let wrong: Vec<String> = rows
        .iter()
        .filter(|(expression, want)| shown(expression) != *want)
        .map(|(expression, want)| format!("{expression}: want {want}, got {}", shown(expression)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_mistake_names_its_column_and_the_fix() {
    let long = "1+".repeat(2100);
    let deep = format!("{}1{}", "(".repeat(150), ")".repeat(150));
    let rows: [(&str, usize, &str); 44] = [
        ("1/0", 2, "division by zero"),
        ("1 / (2 - 2)", 3, "division by zero"),
        ("5 % 0", 3, "division by zero"),
        ("0^-1", 2, "0 to a negative power"),
        ("sqrt(-1)", 1, "sqrt(x) needs x ≥ 0"),
        ("1 + ln(0)", 5, "logarithms need x > 0"),
        ("log(-2)", 1, "logarithms need x > 0"),
        ("log(10, 1)", 1, "base ≠ 1"),
        ("asin(2)", 1, "needs -1 ≤ x ≤ 1"),
        ("(-8)^(1/3)", 5, "cbrt(-8)"),
        ("exp(1000)", 1, "overflow"),
        ("10^400 * pi", 8, "overflow"),
        ("9^9^9^9", 4, "overflow"),
        ("2^100000", 2, "overflow"),
        ("1e5000", 1, "out of range"),
        ("2^4096", 2, "exact numbers stop below 2^4096 (about 1233 digits)"),
        ("1,000", 2, "\"1,000\" is ambiguous"),
        ("max(2,500)", 6, "write 2500 for the number"),
        ("3,5", 2, "decimal point is `.`"),
        ("sqr(2)", 1, "unknown name `sqr`; the known names are the functions sqrt(x)"),
        ("2*Pi", 3, "names are lower case: write `pi`"),
        ("x + 1", 1, "no variables"),
        ("2pi", 2, "write `*` to multiply"),
        ("(1+2", 5, "to close the `(` at column 1"),
        ("1+2)", 4, "`)` has no matching `(`"),
        ("6 *", 4, "the end of the expression where a number"),
        ("\"a\"", 1, "no strings"),
        ("1 == 1", 3, "no comparison"),
        ("sqrt + 1", 1, "`sqrt` is a function: call it, as in sqrt(x)"),
        ("mod(7, 2)", 1, "write a mod b or a % b for a remainder"),
        ("7 mod", 6, "the end of the expression"),
        ("square root of", 15, "the end of the expression"),
        ("mean of 1 and", 14, "the end of the expression"),
        ("sqrt of 4, 9", 10, "`,` only separates a function's arguments"),
        ("3 of", 5, "the end of the expression"),
        ("pi(2)", 1, "`pi` is a constant"),
        ("sqrt(1, 2)", 1, "`sqrt` got 2 argument(s)"),
        ("round(1, 0.5)", 1, "round's digits must be a whole number"),
        ("  ", 1, "the expression is empty"),
        ("1__0", 2, "`_` may only separate digits"),
        ("2340*17%", 8, "not a percent sign: for 17% of 2340 write 17% of 2340 or 17/100*2340"),
        ("17% * 2340", 3, "not a percent sign"),
        ("$ 85", 1, "write numbers"),
        ("17 percent", 4, "a percentage needs the number it is taken of: write 17 percent of 2340"),
    ];
    let mut wrong = Vec::new();
    for (expression, column, words) in rows {
        let message = shown(expression);
        if !(message.starts_with("error: ")
            && message.contains(words)
            && message.contains(&format!("(column {column} of")))
        {
            wrong.push(format!("{expression}: want column {column} and {words:?}, got {message}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(shown(&long).contains("characters long, over the limit of 4096"));
    assert!(shown(&deep).contains("nested more than 100 deep"));
    assert!(shown(&"-".repeat(500)).contains("nested more than 100 deep"));
    assert!(shown("str::substring(\"é\",0,1)").contains("no strings"));
}

#[test]
fn a_long_expression_is_shown_around_the_mistake() {
    let expression = format!("{}1/0{}", "1+".repeat(100), "+1".repeat(100));
    let message = shown(&expression);
    assert!(message.contains("(column 202 of \"…+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1/0+1+1"), "{message}");
}

#[test]
fn a_long_chain_is_a_loop_not_nesting() {
    assert_eq!(shown(&format!("1{}", "+1".repeat(2000))), "2001");
}
