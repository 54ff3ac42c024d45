package proxy

import (
	"strings"
	"testing"
)

// TestFramerAcrossReads: the verdict on a head does not depend on how the
// bytes were split into reads.
func TestFramerAcrossReads(t *testing.T) {
	t.Parallel()
	head := "POST /p/x HTTP/1.1\r\nHost: gw\r\nX-Long: " + strings.Repeat("v", 300) + "\r\n"
	for name, tc := range map[string]struct {
		payload string
		want    framingVerdict
	}{
		"CL and TE":       {head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", framingAmbiguous},
		"folded":          {head + "Transfer-Encoding:\r\n chunked\r\n\r\n", framingAmbiguous},
		"unreadable CL":   {head + "Content-Length: 5x\r\n\r\n", framingAmbiguous},
		"CL then chunked": {head + "Content-Length: 2\r\n\r\n{}" + head + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", framingBlind},
		"keep-alive": {head + "Content-Length: 31\r\n\r\nTransfer-Encoding: chunked\r\n\r\n\n" +
			"\r\nGET /p/y HTTP/1.1\nHost: gw\n\n" + head + "\r\n", framingOK},
	} {
		whole := framer{maxHead: 1 << 20}
		split := framer{maxHead: 1 << 20}
		got := whole.feed([]byte(tc.payload))
		var gotSplit framingVerdict
		for i := range len(tc.payload) {
			gotSplit = split.feed([]byte{tc.payload[i]})
		}
		if got != tc.want || gotSplit != tc.want {
			t.Errorf("%s: verdict %v in one read, %v a byte at a time; want %v", name, got, gotSplit, tc.want)
		}
	}
}
