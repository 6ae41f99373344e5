package client

import (
	"context"
	"strings"
	"testing"
)

// TestExecRefusesWhatIsNotText: a request whose argument, environment
// entry, directory or stdin is not UTF-8 is refused before it is sent,
// saying which (the API's JSON strings carried such a byte as U+FFFD, and
// the command got another argument than the one given, found by a
// tester); the control: the same request in UTF-8 is sent, and answered.
func TestExecRefusesWhatIsNotText(t *testing.T) {
	c := Unix(fakeDaemon(t, `{"exit":{"exit_code":0,"reason":"exit"}}`+"\n"))
	defer c.Close()
	ctx := context.Background()
	for _, req := range []ExecRequest{
		{Args: []string{"rm", "x\x9by"}},
		{Args: []string{"true"}, Env: []string{"A=\xff"}},
		{Args: []string{"true"}, Dir: "d\xfe"},
		{Args: []string{"cat"}, Stdin: "\x00\xff"},
	} {
		_, err := c.Exec(ctx, "s1", &req, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("Exec %+v: %v, want a refusal", req, err)
		}
		if _, err := c.Start(ctx, "s1", &req); err == nil || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("Start %+v: %v, want a refusal", req, err)
		}
		if _, err := c.Interactive(ctx, "s1", &req, nil, nil); err == nil || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("Interactive %+v: %v, want a refusal", req, err)
		}
	}
	rep, err := c.Exec(ctx, "s1", &ExecRequest{Args: []string{"rm", "x\u00e9y"}, Stdin: "héllo"}, nil, nil)
	if err != nil || rep == nil || rep.ExitCode != 0 {
		t.Errorf("control: %+v %v", rep, err)
	}
}
