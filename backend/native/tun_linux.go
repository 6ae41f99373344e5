package native

import (
	"fmt"
	"unsafe"

	"github.com/moatbox/moat/backend"
	"golang.org/x/sys/unix"
)

// rtentry is struct rtentry of <net/route.h> (SIOCADDRT): unsigned long
// and pointers are uintptr, so the layout holds on every Linux ABI.
type rtentry struct {
	pad1    uintptr
	dst     unix.RawSockaddrInet4
	gateway unix.RawSockaddrInet4
	genmask unix.RawSockaddrInet4
	flags   uint16
	pad2    int16
	pad3    uintptr
	pad4    uintptr
	metric  int16
	dev     *byte
	mtu     uintptr
	window  uintptr
	irtt    uint16
}

// tunConfig is the memory of the calls that make and configure a TUN
// device: the ifreqs of TUNSETIFF, SIOCSIFADDR, SIOCSIFNETMASK, SIOCSIFMTU
// and SIOCSIFFLAGS, and the default route's rtentry (SIOCADDRT).
type tunConfig struct {
	setiff, addr, mask, mtu, up *unix.Ifreq
	route                       *rtentry
	dev                         []byte
	// offload is TUNSETOFFLOAD's argument: the checksum offload of a
	// device with virtio-net headers (TUN.VnetHdr), 0 for none.
	offload uintptr
}

func newTUNConfig(t *backend.TUN) (*tunConfig, error) {
	if t == nil || !t.Addr.Addr().Is4() || t.MTU < 68 || t.MTU > 65535 {
		return nil, fmt.Errorf("invalid TUN device %+v: an IPv4 address and an MTU from 68 to 65535 are needed", t)
	}
	c := &tunConfig{}
	var err error
	for _, r := range []**unix.Ifreq{&c.setiff, &c.addr, &c.mask, &c.mtu, &c.up} {
		if *r, err = unix.NewIfreq(t.Name); err != nil {
			return nil, fmt.Errorf("TUN device name %q: %w", t.Name, err)
		}
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if t.VnetHdr {
		flags |= unix.IFF_VNET_HDR
		c.offload = unix.TUN_F_CSUM
	}
	c.setiff.SetUint16(flags)
	a := t.Addr.Addr().As4()
	if err := c.addr.SetInet4Addr(a[:]); err != nil {
		return nil, err
	}
	var m [4]byte
	bits := t.Addr.Bits()
	for i := range m {
		n := min(max(bits-8*i, 0), 8)
		m[i] = byte(0xff << (8 - n))
	}
	if err := c.mask.SetInet4Addr(m[:]); err != nil {
		return nil, err
	}
	c.mtu.SetUint32(uint32(t.MTU))
	c.up.SetUint16(unix.IFF_UP)
	c.dev = append([]byte(t.Name), 0)
	c.route = &rtentry{flags: unix.RTF_UP, dev: &c.dev[0]}
	c.route.dst.Family, c.route.genmask.Family = unix.AF_INET, unix.AF_INET
	return c, nil
}

// ioctls are the configuration calls on an AF_INET socket of the
// namespace, in order, with what each does for an error message.
func (c *tunConfig) ioctls() []struct {
	req  uintptr
	arg  unsafe.Pointer
	what string
} {
	return []struct {
		req  uintptr
		arg  unsafe.Pointer
		what string
	}{
		{unix.SIOCSIFADDR, unsafe.Pointer(c.addr), "address"},
		{unix.SIOCSIFNETMASK, unsafe.Pointer(c.mask), "netmask"},
		{unix.SIOCSIFMTU, unsafe.Pointer(c.mtu), "mtu"},
		{unix.SIOCSIFFLAGS, unsafe.Pointer(c.up), "up"},
		{unix.SIOCADDRT, unsafe.Pointer(c.route), "default route"},
	}
}

// openTUN makes and configures the TUN device (a persistent one: see
// below) in the calling thread's network namespace, opening the clone
// device "tun" in the directory dir (an O_PATH fd), and returns the
// device's fd. sock is an AF_INET socket of that namespace.
//
// The directory (TUN.DevDir) is opened before the sandbox's root replaces
// the host's: by the host for the direct start, whose network steps run
// in a helper while init builds the root, and by the init stage as it
// starts; "tun" is opened relative to it once in the new network
// namespace, because a TUN device belongs to the namespace its opener is
// in.
func openTUN(dir, sock int, t *backend.TUN) (int, error) {
	c, err := newTUNConfig(t)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(dir, "tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s/tun: %w", t.DevDir(), err)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(c.setiff))); e != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("TUN device %s (TUNSETIFF): %w", t.Name, e)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETPERSIST, 1); e != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("TUN device %s (TUNSETPERSIST): %w", t.Name, e)
	}
	if c.offload != 0 {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETOFFLOAD, c.offload); e != 0 {
			unix.Close(fd)
			return -1, fmt.Errorf("TUN device %s (TUNSETOFFLOAD): %w", t.Name, e)
		}
	}
	for _, io := range c.ioctls() {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(sock), io.req, uintptr(io.arg)); e != 0 {
			unix.Close(fd)
			return -1, fmt.Errorf("TUN device %s %s: %w", t.Name, io.what, e)
		}
	}
	return fd, nil
}

// The device is made persistent (TUNSETPERSIST). A device that is not
// is unregistered when the last fd attached to it closes, in that close:
// unregistering waits for RCU grace periods, which held the host's exit
// (where its fd closes) by 10-20 ms on the project's machines. A
// persistent one outlives the fd and goes with its network namespace,
// which the kernel tears down in the background once the sandbox's last
// process and the host's fd are gone. Nothing can attach to it in the
// meantime: it is attached to the host's fd while any command lives (a
// TUN device takes one queue), the sandbox has no /dev/net/tun, and
// attaching needs the clone device.

// tun adds openTUN's steps to the plan, opening "tun" in dir (an fd), on
// the namespace's socket in slot sock; the device's fd is left in the
// returned slot.
func (p *plan) tun(dir int, sock uint16, t *backend.TUN) (uint16, error) {
	c, err := newTUNConfig(t)
	if err != nil {
		return 0, err
	}
	if dir < 0 {
		return 0, fmt.Errorf("no fd of %s for the TUN device", t.DevDir())
	}
	p.keep = append(p.keep, c)
	fd := p.val()
	stg := p.stage("open " + t.DevDir() + "/tun")
	i := p.call(stg, unix.SYS_OPENAT, uintptr(dir), p.str("tun"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	p.at(i).save = fd
	p.call(stg, unix.SYS_CLOSE, uintptr(dir))
	i = p.call(p.stage("TUN device "+t.Name+" (TUNSETIFF)"), unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(c.setiff)))
	p.at(i).ref = 1
	i = p.call(p.stage("TUN device "+t.Name+" (TUNSETPERSIST)"), unix.SYS_IOCTL, uintptr(fd), unix.TUNSETPERSIST, 1)
	p.at(i).ref = 1
	if c.offload != 0 {
		i = p.call(p.stage("TUN device "+t.Name+" (TUNSETOFFLOAD)"), unix.SYS_IOCTL, uintptr(fd), unix.TUNSETOFFLOAD, c.offload)
		p.at(i).ref = 1
	}
	for _, io := range c.ioctls() {
		i = p.call(p.stage("TUN device "+t.Name+" "+io.what), unix.SYS_IOCTL, uintptr(sock), io.req, uintptr(io.arg))
		p.at(i).ref = 1
	}
	return fd, nil
}

// tunInNamespace is openTUN for the init stage, on the thread already in
// the sandbox's network namespace; it closes dir.
func tunInNamespace(dir int, t *backend.TUN) (int, error) {
	defer unix.Close(dir)
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(sock)
	return openTUN(dir, sock, t)
}
