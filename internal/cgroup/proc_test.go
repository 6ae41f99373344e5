package cgroup

import (
	"maps"
	"testing"
)

// hybridMountInfo is the cgroup part of a Debian 12 VM with the hybrid layout
// (cpu and cpuacct mounted separately), plus an unrelated mount.
const hybridMountInfo = `22 1 254:1 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const hybridProcCgroup = `9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/
`

func TestResolve(t *testing.T) {
	tests := []struct {
		name        string
		mountinfo   string
		proc        string
		wantV1      map[string]string
		wantWhy     []string // controllers with a v1Why entry
		wantV2      string
		wantRoot    bool
		wantVersion string
	}{{
		name:      "hybrid, separate cpu and cpuacct",
		mountinfo: hybridMountInfo,
		proc:      hybridProcCgroup,
		wantV1: map[string]string{
			"cpu":     "/sys/fs/cgroup/cpu",
			"cpuacct": "/sys/fs/cgroup/cpuacct",
			"memory":  "/sys/fs/cgroup/memory/process_api/abc",
			"freezer": "/sys/fs/cgroup/freezer",
			"pids":    "/sys/fs/cgroup/pids",
		},
		wantV2:      "/sys/fs/cgroup/unified",
		wantRoot:    true,
		wantVersion: "hybrid",
	}, {
		name: "v1, co-mounted cpu,cpuacct",
		mountinfo: `25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
`,
		proc: `3:cpu,cpuacct:/user.slice
2:memory:/user.slice/x
`,
		wantV1: map[string]string{
			"cpu":     "/sys/fs/cgroup/cpu,cpuacct/user.slice",
			"cpuacct": "/sys/fs/cgroup/cpu,cpuacct/user.slice",
			"memory":  "/sys/fs/cgroup/memory/user.slice/x",
		},
		wantVersion: "v1",
	}, {
		name:        "v2 in a container: mount root is the caller's cgroup",
		mountinfo:   "50 40 0:30 /docker/abc /sys/fs/cgroup rw master:1 - cgroup2 cgroup2 rw,nsdelegate\n",
		proc:        "0::/docker/abc/init\n",
		wantV1:      map[string]string{},
		wantV2:      "/sys/fs/cgroup/init",
		wantVersion: "v2",
	}, {
		name:        "v2, caller outside the mounted subtree",
		mountinfo:   "50 40 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		proc:        "0::/elsewhere\n",
		wantV1:      map[string]string{},
		wantVersion: "v2",
	}, {
		name:        "v1 memory mount that does not show the caller",
		mountinfo:   "26 24 0:23 /a /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		proc:        "2:memory:/b\n",
		wantV1:      map[string]string{},
		wantWhy:     []string{"memory"},
		wantVersion: "v1",
	}, {
		name:        "escaped mount point",
		mountinfo:   `41 31 0:38 / /mnt/my\040cgroup rw - cgroup2 cgroup2 rw` + "\n",
		proc:        "0::/a\n",
		wantV1:      map[string]string{},
		wantV2:      "/mnt/my cgroup/a",
		wantVersion: "v2",
	}, {
		name:        "nothing mounted",
		mountinfo:   "22 1 254:1 / / rw,relatime - ext4 /dev/vda rw\n",
		proc:        "0::/\n",
		wantV1:      map[string]string{},
		wantVersion: "none",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := resolve(parseMountInfo([]byte(tt.mountinfo)), parseProcCgroup([]byte(tt.proc)))
			if !maps.Equal(l.v1, tt.wantV1) {
				t.Errorf("v1 = %v, want %v", l.v1, tt.wantV1)
			}
			for _, c := range tt.wantWhy {
				if l.v1Why[c] == "" {
					t.Errorf("no reason given for unusable %s", c)
				}
			}
			if l.v2 != tt.wantV2 || l.v2Root != tt.wantRoot {
				t.Errorf("v2 = %q (root %v), want %q (root %v)", l.v2, l.v2Root, tt.wantV2, tt.wantRoot)
			}
			if v := l.version(); v != tt.wantVersion {
				t.Errorf("version = %q, want %q", v, tt.wantVersion)
			}
		})
	}
}

func TestKeyedValue(t *testing.T) {
	data := []byte("low 0\nhigh 0\nmax 7\noom 2\noom_kill 3\n")
	for key, want := range map[string]int64{"max": 7, "oom_kill": 3, "oom": 2, "missing": 0} {
		if got := keyedValue(data, key); got != want {
			t.Errorf("keyedValue(%q) = %d, want %d", key, got, want)
		}
	}
	// v1 memory.oom_control
	if got := keyedValue([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), "oom_kill"); got != 1 {
		t.Errorf("oom_control oom_kill = %d, want 1", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(hybridMountInfo), []byte(hybridProcCgroup))
	f.Add([]byte(`1 2 0:1 /a\ /b\04 x - cgroup cgroup rw,cpu`), []byte("1:cpu:/a\n0::"))
	f.Fuzz(func(t *testing.T, mountinfo, proc []byte) {
		l := resolve(parseMountInfo(mountinfo), parseProcCgroup(proc))
		_ = l.version()
	})
}
