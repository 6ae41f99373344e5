package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"time"

	"github.com/moatbox/moat/backend"
)

// The host and init exchange the initSpec and the messages as frames: a
// 4-byte little-endian length, then the fields in a fixed order (varints,
// length-prefixed strings). Both ends are this same binary, so the format
// needs no versioning or field names. It is written by hand because it is
// on the start-up path twice: encoding/json spent about 0.3 ms of init's
// start-up building its reflection caches to decode the Spec, and as much
// again for the messages, where this takes microseconds.
// TestCodecRoundTrip fills every field by reflection, so a field added to
// these types and forgotten here fails it.

// maxFrame bounds a frame, so a corrupt length cannot make init allocate
// without limit. A Spec is a few KiB.
const maxFrame = 16 << 20

type encoder struct{ b []byte }

func (e *encoder) uint(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)    { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)   { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(b []byte) { e.uint(uint64(len(b))); e.b = append(e.b, b...) }
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *encoder) strs(ss []string) {
	e.uint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *encoder) ints(v []int) {
	e.uint(uint64(len(v)))
	for _, n := range v {
		e.int(int64(n))
	}
}

// frame returns the encoded fields with their length in front.
func (e *encoder) frame() []byte {
	out := make([]byte, 4, 4+len(e.b))
	binary.LittleEndian.PutUint32(out, uint32(len(e.b)))
	return append(out, e.b...)
}

type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated frame")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length and checks that at least that many bytes remain
// (every element takes at least one), so a corrupt count cannot allocate.
func (d *decoder) count() int {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return 0
	}
	return int(n)
}

func (d *decoder) raw() []byte {
	n := d.count()
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) bytes() []byte {
	r := d.raw()
	if r == nil {
		return nil
	}
	return append([]byte{}, r...)
}

func (d *decoder) bool() bool {
	if len(d.b) == 0 {
		d.fail(errShort)
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v != 0
}

func (d *decoder) strs() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func (d *decoder) ints() []int {
	n := d.count()
	if n == 0 {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = int(d.int())
	}
	return v
}

// readFrame reads one frame from r; io.EOF when r ends between frames.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes is above the limit of %d", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// encodeInitSpec frames is. The Spec's seccomp profiles are not sent:
// init gets them compiled, in Filters.
func encodeInitSpec(is *initSpec) []byte {
	var e encoder
	s := is.Spec
	e.bool(s != nil)
	if s != nil {
		e.str(s.RunID)
		e.strs(s.Args)
		e.strs(s.Env)
		e.str(s.Dir)
		e.str(s.Hostname)
		e.uint(uint64(len(s.Mounts)))
		for _, m := range s.Mounts {
			e.str(string(m.Kind))
			e.str(m.Source)
			e.str(m.Target)
			e.bool(m.ReadOnly)
			e.str(m.Options)
			e.bool(m.IDMap)
			e.str(m.Data)
			e.str(m.Layers)
			e.bool(m.Optional)
			e.bool(m.NoLandlockGrant)
			e.int(int64(m.Owner))
			e.int(int64(m.OpenUID))
			e.int(int64(m.OpenGID))
			e.ints(m.OpenGroups)
		}
		e.int(int64(s.User.UID))
		e.int(int64(s.User.GID))
		e.int(int64(s.User.HostUID))
		e.int(int64(s.User.HostGID))
		l := s.Limits
		e.int(int64(l.Wall))
		e.int(int64(l.CPUTime))
		e.uint(l.OpenFiles)
		e.uint(l.FileSize)
		e.int(l.OutputBytes)
		e.int(l.MemoryBytes)
		e.int(l.Pids)
		e.bool(l.PidsRlimit)
		e.uint(math.Float64bits(l.CPUs))
		e.int(l.DiskBytes)
		e.str(string(s.Network.Mode))
		e.int(int64(s.Network.ProxyPort))
		e.bool(s.Network.RestrictBind)
		e.ints(s.Network.BindPorts)
		e.bool(s.Network.RestrictConnect)
		e.ints(s.Network.ConnectPorts)
		e.bool(s.Network.TUN != nil)
		if t := s.Network.TUN; t != nil {
			e.str(t.Name)
			addr := ""
			if t.Addr.IsValid() {
				addr = t.Addr.String()
			}
			e.str(addr)
			e.int(int64(t.MTU))
			e.bool(t.VnetHdr)
			e.str(t.Dir)
		}
		e.strs(s.MaskPaths)
		e.strs(s.ReadOnlyPaths)
		e.bool(s.Landlock)
		e.bool(s.SeccompAtExec)
	}
	e.uint(uint64(len(is.Trees)))
	for k, fd := range is.Trees {
		e.str(k)
		e.int(int64(fd))
	}
	e.uint(uint64(len(is.Filters)))
	for _, f := range is.Filters {
		e.bytes(f)
	}
	e.int(int64(is.NetFD))
	e.bool(is.Control)
	e.uint(is.TimerSlack)
	e.bool(is.Terminal)
	e.int(int64(is.SessionFD))
	e.int(int64(is.ExecFD))
	e.bool(is.SetsidOnly)
	e.bool(is.Listen)
	e.bool(is.ListenOnly)
	return e.frame()
}

func decodeInitSpec(b []byte) (*initSpec, error) {
	d := decoder{b: b}
	is := &initSpec{}
	if d.bool() {
		s := &backend.Spec{}
		is.Spec = s
		s.RunID = d.str()
		s.Args = d.strs()
		s.Env = d.strs()
		s.Dir = d.str()
		s.Hostname = d.str()
		if n := d.count(); n > 0 {
			s.Mounts = make([]backend.Mount, n)
			for i := range s.Mounts {
				m := &s.Mounts[i]
				m.Kind = backend.MountKind(d.str())
				m.Source = d.str()
				m.Target = d.str()
				m.ReadOnly = d.bool()
				m.Options = d.str()
				m.IDMap = d.bool()
				m.Data = d.str()
				m.Layers = d.str()
				m.Optional = d.bool()
				m.NoLandlockGrant = d.bool()
				m.Owner = int(d.int())
				m.OpenUID = int(d.int())
				m.OpenGID = int(d.int())
				m.OpenGroups = d.ints()
			}
		}
		s.User.UID = int(d.int())
		s.User.GID = int(d.int())
		s.User.HostUID = int(d.int())
		s.User.HostGID = int(d.int())
		l := &s.Limits
		l.Wall = time.Duration(d.int())
		l.CPUTime = time.Duration(d.int())
		l.OpenFiles = d.uint()
		l.FileSize = d.uint()
		l.OutputBytes = d.int()
		l.MemoryBytes = d.int()
		l.Pids = d.int()
		l.PidsRlimit = d.bool()
		l.CPUs = math.Float64frombits(d.uint())
		l.DiskBytes = d.int()
		s.Network.Mode = backend.NetMode(d.str())
		s.Network.ProxyPort = int(d.int())
		s.Network.RestrictBind = d.bool()
		s.Network.BindPorts = d.ints()
		s.Network.RestrictConnect = d.bool()
		s.Network.ConnectPorts = d.ints()
		if d.bool() {
			t := &backend.TUN{Name: d.str()}
			if a := d.str(); a != "" {
				var err error
				if t.Addr, err = netip.ParsePrefix(a); err != nil {
					d.fail(err)
				}
			}
			t.MTU = int(d.int())
			t.VnetHdr = d.bool()
			t.Dir = d.str()
			s.Network.TUN = t
		}
		s.MaskPaths = d.strs()
		s.ReadOnlyPaths = d.strs()
		s.Landlock = d.bool()
		s.SeccompAtExec = d.bool()
	}
	if n := d.count(); n > 0 {
		is.Trees = make(map[string]int, n)
		for range n {
			k := d.str()
			is.Trees[k] = int(d.int())
		}
	}
	if n := d.count(); n > 0 {
		is.Filters = make([][]byte, n)
		for i := range is.Filters {
			is.Filters[i] = d.bytes()
		}
	}
	is.NetFD = int(d.int())
	is.Control = d.bool()
	is.TimerSlack = d.uint()
	is.Terminal = d.bool()
	is.SessionFD = int(d.int())
	is.ExecFD = int(d.int())
	is.SetsidOnly = d.bool()
	is.Listen = d.bool()
	is.ListenOnly = d.bool()
	return is, d.done()
}

// done reports the first error, or bytes left over (a host and an init
// that disagree on the format).
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes left after the last field", len(d.b))
	}
	return d.err
}

func encodeMessage(m *message) []byte {
	var e encoder
	e.str(m.Type)
	e.uint(m.ID)
	e.str(m.Stage)
	e.str(m.Err)
	e.int(int64(m.Errno))
	e.str(m.Gone)
	e.int(int64(m.Pid))
	e.uint(uint64(m.WaitStatus))
	e.int(m.UserNanos)
	e.int(m.SysNanos)
	e.int(m.MaxRSSKiB)
	e.bool(m.DiskFull)
	e.str(m.MergeErr)
	e.uint(uint64(len(m.Denials)))
	for _, dn := range m.Denials {
		e.int(int64(dn.Nr))
		e.int(int64(dn.Errno))
		e.int(int64(dn.Count))
	}
	return e.frame()
}

func decodeMessage(b []byte) (message, error) {
	d := decoder{b: b}
	var m message
	m.Type = d.str()
	m.ID = d.uint()
	m.Stage = d.str()
	m.Err = d.str()
	m.Errno = int(d.int())
	m.Gone = d.str()
	m.Pid = int(d.int())
	m.WaitStatus = uint32(d.uint())
	m.UserNanos = d.int()
	m.SysNanos = d.int()
	m.MaxRSSKiB = d.int()
	m.DiskFull = d.bool()
	m.MergeErr = d.str()
	if n := d.count(); n > 0 {
		m.Denials = make([]denial, n)
		for i := range m.Denials {
			m.Denials[i] = denial{Nr: int(d.int()), Errno: int(d.int()), Count: int(d.int())}
		}
	}
	return m, d.done()
}
