package gossip

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
)

// Config configures an Agent.
type Config struct {
	// BindAddr is the host:port to listen on (UDP and TCP); port 0 picks one.
	BindAddr string
	// AdvertiseAddr is the host:port other spokes reach this one on; empty:
	// the bound address (or, when bound to 0.0.0.0, a private IP).
	AdvertiseAddr string
	// Profile is wan (default), lan or local.
	Profile string
	// ProbeInterval, ProbeTimeout and SuspicionMult override the profile
	// when not zero.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	SuspicionMult int
	// RejoinInterval: 0 means DefaultRejoinInterval.
	RejoinInterval time.Duration
	// Log receives the agent's and memberlist's messages.
	Log logr.Logger
}

// MemberlistConfig returns memberlist's configuration for the profile with
// the overrides applied.
func (c Config) MemberlistConfig() (*memberlist.Config, error) {
	var mc *memberlist.Config
	switch c.Profile {
	case "", ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	case ProfileLAN:
		mc = memberlist.DefaultLANConfig()
	case ProfileLocal:
		mc = memberlist.DefaultLocalConfig()
	default:
		return nil, fmt.Errorf("gossip: unknown profile %q (wan, lan or local)", c.Profile)
	}
	if c.ProbeInterval > 0 {
		mc.ProbeInterval = c.ProbeInterval
	}
	if c.ProbeTimeout > 0 {
		mc.ProbeTimeout = c.ProbeTimeout
	}
	if c.SuspicionMult > 0 {
		mc.SuspicionMult = c.SuspicionMult
	}
	host, port, err := splitHostPort(c.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip: bind address: %w", err)
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if c.AdvertiseAddr != "" {
		host, port, err := splitHostPort(c.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("gossip: advertise address: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	// A spoke that restarts on another address (a new pod IP) takes its
	// name back as soon as its old self is declared dead, instead of after
	// GossipToTheDeadTime.
	mc.DeadNodeReclaimTime = mc.ProbeInterval
	mc.Label = Label
	return mc, nil
}

// Settings describes the effective memberlist settings, for logs and notes.
func Settings(mc *memberlist.Config) string {
	return fmt.Sprintf("probeInterval=%s probeTimeout=%s suspicionMult=%d gossipInterval=%s pushPullInterval=%s tcpTimeout=%s indirectChecks=%d deadNodeReclaimTime=%s",
		mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult, mc.GossipInterval, mc.PushPullInterval, mc.TCPTimeout, mc.IndirectChecks, mc.DeadNodeReclaimTime)
}

func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", s)
	}
	return host, port, nil
}

// logWriter turns memberlist's "[LEVEL] memberlist: msg" lines into logr
// messages: DEBUG at V(2), INFO at V(1), WARN and ERR at V(0).
type logWriter struct{ log logr.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level, msg, ok := strings.Cut(line, " ")
	if !ok {
		level, msg = "", line
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	switch level {
	case "[DEBUG]":
		w.log.V(2).Info(msg)
	case "[INFO]":
		w.log.V(1).Info(msg)
	case "[WARN]", "[ERR]", "[ERROR]":
		w.log.Info(msg, "level", strings.Trim(level, "[]"))
	default:
		w.log.Info(line)
	}
	return len(p), nil
}

// Profiles.
const (
	ProfileWAN   = "wan"
	ProfileLAN   = "lan"
	ProfileLocal = "local"
)
