package sandbox

import "testing"

func TestWithIdentity(t *testing.T) {
	passwd := "root:x:0:0:root:/root:/bin/bash\n" +
		"alice:x:1000:1000:Alice:/home/alice:/bin/bash\n" + // the sandbox's uid: dropped
		"agent:x:1234:1234::/nonexistent:/bin/false\n" + // the sandbox's name: dropped
		"bob:x:10000:10000::/home/bob:/bin/sh\n" + // 1000 as a prefix only: kept
		"short:x\n" + // too few fields: kept as it is
		"\n" +
		"carol:x:1001:1000::/home/carol:/bin/sh\n\n\n" // gid 1000 is not the uid field: kept
	want := "root:x:0:0:root:/root:/bin/bash\n" +
		"bob:x:10000:10000::/home/bob:/bin/sh\n" +
		"short:x\n" +
		"\n" +
		"carol:x:1001:1000::/home/carol:/bin/sh\n" +
		"agent:x:1000:1000:moat sandbox:/home/agent:/bin/sh\n"
	if got := withIdentity(passwd, 2, "1000", "agent:x:1000:1000:moat sandbox:/home/agent:/bin/sh"); got != want {
		t.Errorf("passwd:\n%s\nwant:\n%s", got, want)
	}
	group := "root:x:0:\nusers:x:1000:alice,bob\nagent:x:5:\nstaff:x:50:\n"
	wantGroup := "root:x:0:\nstaff:x:50:\nagent:x:1000:\n"
	if got := withIdentity(group, 2, "1000", "agent:x:1000:"); got != wantGroup {
		t.Errorf("group:\n%s\nwant:\n%s", got, wantGroup)
	}
	if got := withIdentity("", 2, "1000", "agent:x:1000:"); got != "agent:x:1000:\n" {
		t.Errorf("empty file: %q", got)
	}
}
