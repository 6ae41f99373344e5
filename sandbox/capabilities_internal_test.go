package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
)

// TestTCPRulesNeedLandlockABI4: a Spec with TCP port rules is refused on a
// kernel whose Landlock cannot enforce them, and with --allow-degraded it
// runs without them, saying so. (The capabilities are the backend's answer
// for such a kernel; TestLandlockTCPPorts runs the real thing.)
func TestTCPRulesNeedLandlockABI4(t *testing.T) {
	for _, abi := range []int{0, 3} {
		newSpec := func() *backend.Spec {
			return &backend.Spec{Network: backend.Network{Mode: backend.NetNone, RestrictConnect: true, ConnectPorts: []int{443}}}
		}
		_, err := checkCapabilities(newSpec(), backend.Capabilities{LandlockABI: abi}, false)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "TCP port rules") {
			t.Errorf("ABI %d: got %v, want a refusal naming the TCP port rules", abi, err)
		}
		spec := newSpec()
		gaps, err := checkCapabilities(spec, backend.Capabilities{LandlockABI: abi}, true)
		if err != nil || len(gaps) != 1 || spec.Network.RestrictConnect || spec.Network.ConnectPorts != nil {
			t.Errorf("ABI %d, allow degraded: err %v gaps %q network %+v", abi, err, gaps, spec.Network)
		}
	}
	spec := &backend.Spec{Network: backend.Network{RestrictBind: true}}
	if gaps, err := checkCapabilities(spec, backend.Capabilities{LandlockABI: 4}, false); err != nil || len(gaps) != 0 {
		t.Errorf("ABI 4: %v %q", err, gaps)
	}
}
