package usage

import (
	"strings"
	"testing"
)

func TestInjectIncludeUsage(t *testing.T) {
	t.Parallel()
	const msgs = `"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body, want string
		changed          bool
	}{
		{"Added", `{` + msgs + `,"stream":true}`, `{` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"AddedKeepingSpacing", "{\n  \"stream\": true\n}\n", "{\n  \"stream\": true,\"stream_options\":{\"include_usage\":true}\n}\n", true},
		{"NumbersKeptExact", `{"stream":true,"seed":12345678901234567890,"temperature":0.1000000000000000055511151231257827,"logit_bias":{"50256":-1e2}}`, `{"stream":true,"seed":12345678901234567890,"temperature":0.1000000000000000055511151231257827,"logit_bias":{"50256":-1e2},"stream_options":{"include_usage":true}}`, true},
		{"EscapesKept", `{"stream":true,"user":"\u00e9\ud83d\ude00\"}"}`, `{"stream":true,"user":"\u00e9\ud83d\ude00\"}","stream_options":{"include_usage":true}}`, true},
		{"StreamOptionsNull", `{"stream":true,"stream_options":null,"n":1}`, `{"stream":true,"stream_options":{"include_usage":true},"n":1}`, true},
		{"StreamOptionsEmpty", `{"stream":true,"stream_options": { } }`, `{"stream":true,"stream_options": {"include_usage":true } }`, true},
		{"StreamOptionsOtherKey", `{"stream_options":{"include_obfuscation":false},"stream":true}`, `{"stream_options":{"include_obfuscation":false,"include_usage":true},"stream":true}`, true},
		{"IncludeUsageFalse", `{"stream":true,"stream_options":{"include_usage" : false}}`, `{"stream":true,"stream_options":{"include_usage" : true}}`, true},
		{"IncludeUsageNull", `{"stream":true,"stream_options":{"include_usage":null}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"EscapedKeyRecognised", `{"stream":true,"stream\u005foptions":{"include_usage":true}}`, `{"stream":true,"stream\u005foptions":{"include_usage":true}}`, false},
		{"AlreadyTrue", `{"stream":true,"stream_options":{"include_usage":true}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, false},
		{"NotStreamed", `{` + msgs + `}`, `{` + msgs + `}`, false},
		{"StreamFalse", `{"stream":false}`, `{"stream":false}`, false},
		{"StreamString", `{"stream":"true"}`, `{"stream":"true"}`, false},
		{"KeysAreCaseSensitive", `{"Stream":true}`, `{"Stream":true}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, changed, err := InjectIncludeUsage([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want || changed != c.changed {
				t.Errorf("got %s changed=%v\nwant %s changed=%v", out, changed, c.want, c.changed)
			}
		})
	}
}

func TestInjectIncludeUsageRefuses(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"Array":                  `[{"stream":true}]`,
		"String":                 `"stream"`,
		"Null":                   `null`,
		"Empty":                  ``,
		"Invalid":                `{"stream":true,}`,
		"TrailingData":           `{"stream":true} {}`,
		"StreamOptionsString":    `{"stream":true,"stream_options":"include_usage"}`,
		"StreamOptionsArray":     `{"stream":true,"stream_options":[]}`,
		"DuplicateStream":        `{"stream":false,"stream":true}`,
		"DuplicateStreamOptions": `{"stream":true,"stream_options":{},"stream_options":null}`,
		"DuplicateIncludeUsage":  `{"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`,
		"TooDeep":                `{"stream":true,"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	} {
		if out, _, err := InjectIncludeUsage([]byte(body)); err == nil {
			t.Errorf("%s: no error, got %s", name, out)
		}
	}
}
