package event_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
)

type canonCase struct {
	name, in, want string
}

// canonCases are valid inputs and their canonical forms. Inputs are raw
// strings, so JSON escapes reach Canonical as written; wants that hold raw
// non-ASCII use Go escapes.
var canonCases = []canonCase{
	// RFC 8785 §3.2.3: keys sorted by UTF-16 code units, not code points
	// (U+1F600 is D83D DE00, so it sorts before U+FB33).
	{"rfc8785 key sorting",
		`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
		"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
	// RFC 8785 §3.2.2: the whole-document example. 333333333.33333329 has
	// more digits than a float64 holds, so the lossless departure keeps it
	// (RFC 8785 prints 333333333.3333333); every other value is as the RFC says.
	{"rfc8785 example",
		"{\n  \"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n" +
			"  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n" +
			"  \"literals\": [null, true, false]\n}",
		"{\"literals\":[null,true,false],\"numbers\":[333333333.33333329,1e+30,4.5,0.002,1e-27]," +
			"\"string\":\"\u20ac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"},

	// Numbers (RFC 8785 §3.2.2.3, ECMAScript Number::toString).
	{"1e30", `1e30`, `1e+30`},
	{"1E30", `1E30`, `1e+30`},
	{"333333333.3333333", `333333333.3333333`, `333333333.3333333`},
	{"333333333.33333329 kept (lossless departure)", `333333333.33333329`, `333333333.33333329`},
	{"4.50", `4.50`, `4.5`},
	{"2e-3", `2e-3`, `0.002`},
	{"1e-27", `0.000000000000000000000000001`, `1e-27`},
	{"minus zero", `-0`, `0`},
	{"minus zero fraction", `-0.0e5`, `0`},
	{"zero exponent", `0E-9999999999999999999999`, `0`},
	{"1e21", `1000000000000000000000`, `1e+21`},
	{"1e20", `100000000000000000000`, `100000000000000000000`},
	{"1e-7", `0.0000001`, `1e-7`},
	{"1e-6", `1e-6`, `0.000001`},
	{"negative fraction", `-1.50`, `-1.5`},
	{"max safe integer", `9007199254740991`, `9007199254740991`},
	{"2^53", `9007199254740992`, `9007199254740992`},

	// The lossless departure: literals no float64 denotes exactly keep their
	// digits; literals that one does are rendered as JavaScript would.
	{"large integer kept", `12345678901234567890`, `12345678901234567890`},
	{"2^53+1 kept", `9007199254740993`, `9007199254740993`},
	{"negative 2^53+1 kept", `-9007199254740993`, `-9007199254740993`},
	{"1.0", `1.0`, `1`},
	{"1e2", `1e2`, `100`},
	{"1.5e+1", `1.5e+1`, `15`},
	{"150e-1", `150e-1`, `15`},
	{"0.00015e5", `0.00015e5`, `15`},
	{"-15e-0", `-15e-0`, `-15`},
	{"1.25e-7", `125E-9`, `1.25e-7`},
	{"0.1 kept as 0.1", `0.1`, `0.1`},
	{"inexact fraction kept", `0.10000000000000000001`, `0.10000000000000000001`},
	{"overflow kept", `1e400`, `1e400`},
	{"underflow kept", `1e-400`, `1e-400`},
	{"huge negative exponent kept", `1e-999999`, `1e-999999`},
	{"exponent past int64 kept", `1e99999999999999999999`, `1e99999999999999999999`},

	// Whitespace and structure.
	{"whitespace removed", " \t\r\n{ \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } , \"c\" : [ ] }\r\n ", `{"a":[1,2],"b":{},"c":[]}`},
	{"nested", `{"b":[{"z":1,"a":[true,{"y":null,"x":"s"}]}],"a":{}}`, `{"a":{},"b":[{"a":[true,{"x":"s","y":null}],"z":1}]}`},
	{"deep arrays", `[[[[]]],[[1]]]`, `[[[[]]],[[1]]]`},
	{"literals", `[true,false,null]`, `[true,false,null]`},
	{"empty input is null", ``, `null`},
	// A repeated key keeps its last value, as JSON.parse reads it.
	{"repeated key", `{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
	{"repeated nested key", `{"o":{"k":[1],"k":{"z":0,"y":1}}}`, `{"o":{"k":{"y":1,"z":0}}}`},

	// Strings: escape only ", \ and U+0000..U+001F (lower-case \u00xx, or the
	// short forms); never /, <, >, &, DEL, U+2028 or non-ASCII.
	{"control characters", `"\u0000\u0001\u001F\u001f"`, `"\u0000\u0001\u001f\u001f"`},
	{"short escapes", `"\b\f\n\r\t\u0008\u000c\u000A\u000D\u0009"`, `"\b\f\n\r\t\b\f\n\r\t"`},
	{"quote and backslash", `"\"\\\u0022\u005C"`, `"\"\\\"\\"`},
	{"solidus unescaped", `"\/a/b"`, `"/a/b"`},
	{"html characters unescaped", `"<script>&amp;\u003c\u003e\u0026"`, `"<script>&amp;<>&"`},
	{"non-ASCII unescaped", `"\u00e9\u20ac\ud83d\ude00é€"`, "\"\u00e9\u20ac\U0001F600\u00e9\u20ac\""},
	{"DEL and separators unescaped", `"\u007f\u2028\u2029\u0080"`, "\"\u007f\u2028\u2029\u0080\""},
	{"escaped key", `{"\u0062":1,"\u0061":2}`, `{"a":2,"b":1}`},
	// A lone surrogate is kept and printed as JSON.stringify prints it.
	{"lone high surrogate", `"\uD800"`, `"\ud800"`},
	{"lone low surrogate", `"x\udc00y"`, `"x\udc00y"`},
	{"split pair", `"\ud83dx\ude00"`, `"\ud83dx\ude00"`},
	{"high before pair", `"\ud83d\ud83d\ude00"`, "\"\\ud83d\U0001F600\""},
	{"lone surrogate key order", `{"\uffff":1,"\ud800":2,"\ud83d\ude00":3}`, "{\"\\ud800\":2,\"\U0001F600\":3,\"\uffff\":1}"},
}

func TestCanonical(t *testing.T) {
	for _, tc := range canonCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := event.Canonical([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCanonicalIsIdempotent(t *testing.T) {
	for _, tc := range canonCases {
		once := event.MustCanonical([]byte(tc.in))
		twice, err := event.Canonical(once)
		if err != nil {
			t.Errorf("%s: canonical output %q refused: %v", tc.name, once, err)
			continue
		}
		if string(twice) != string(once) {
			t.Errorf("%s: Canonical is not a fixed point: %q then %q", tc.name, once, twice)
		}
		if !json.Valid(once) {
			t.Errorf("%s: canonical output %q is not valid JSON", tc.name, once)
		}
	}
}

func TestCanonicalRefusesInvalidInput(t *testing.T) {
	for _, in := range []string{
		`{`, `}`, `[1,2`, `{"a":1,}`, `[1,]`, `01`, `+1`, `.5`, `1.`, `NaN`, `Infinity`,
		`"a" "b"`, `{'a':1}`, `{"a"}`, `tru`, " ", `"\x"`, `"\u12"`,
		"\"a\x01b\"",       // raw control character in a string
		"\"\xff\"",         // invalid UTF-8
		"\"\xed\xa0\x80\"", // a surrogate encoded as UTF-8
		"[1]\x00",
	} {
		got, err := event.Canonical([]byte(in))
		if !errors.Is(err, event.ErrNotCanonicalizable) {
			t.Errorf("Canonical(%q) = %q, %v; want ErrNotCanonicalizable", in, got, err)
		}
	}
}

func TestMustCanonicalPanicsOnInvalidInput(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("MustCanonical did not panic on invalid JSON")
		}
	}()
	event.MustCanonical([]byte(`{`))
}

// TestCanonicalNumberCostIsLinear is the regression for a literal such as
// 1e-999999: it once went through big.Rat, which expands the power of ten
// (about 35 ms a number, so a 16 MiB payload would take hours).
func TestCanonicalNumberCostIsLinear(t *testing.T) {
	in := "[" + strings.Repeat("1e-999999,-7.5e-999998,", 1000) + "0]"
	start := time.Now()
	out, err := event.Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("literals changed: %.80q…", out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("2 000 extreme-exponent numbers took %v", d)
	}
}

func TestFormatJSNumber(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{123.456, "123.456"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{123456789012345680000, "123456789012345680000"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{-1e-7, "-1e-7"},
		{1.5e-10, "1.5e-10"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{9007199254740992, "9007199254740992"},
		{333333333.33333329, "333333333.3333333"},
		{1e30, "1e+30"},
		{1 << 62, "4611686018427388000"},
	} {
		if got := event.FormatJSNumber(tc.in); got != tc.want {
			t.Errorf("FormatJSNumber(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
