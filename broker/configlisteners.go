package broker

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// plaintext is the client (and inter-broker) listener's name, and the only security protocol.
const plaintext = "PLAINTEXT"

// securityProtocols are Kafka's; Sluice speaks only PLAINTEXT.
var securityProtocols = []string{plaintext, "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// listener is one NAME://host:port of listeners or advertised.listeners.
type listener struct{ name, addr string }

// validListenerName is Kafka's rule: letters, digits and underscores.
func validListenerName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// checkHostPort checks host:port with a port in 1..65535. An address listened on may also
// have an empty host (every interface) and port 0 (one the system picks), as in Kafka; one to
// connect to may not.
func checkHostPort(addr string, listening bool) error {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	lo := 1
	if listening {
		lo = 0
	}
	if port, err := strconv.Atoi(portText); err != nil || port < lo || port > 65535 {
		return fmt.Errorf("port %q is not in %d..65535", portText, lo)
	}
	if host == "" && !listening {
		return fmt.Errorf("no host")
	}
	return nil
}

// parseListeners splits NAME://host:port[,...]; an entry without a NAME:// is PLAINTEXT
// (Sluice's older form, listeners=127.0.0.1:9092). Each name once, as Kafka requires.
func parseListeners(p prop, listening bool) ([]listener, error) {
	entries := splitList(p.value)
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: %q: want NAME://host:port[,NAME://host:port]", p.key, p.value)
	}
	var out []listener
	for _, e := range entries {
		name, addr, ok := strings.Cut(e, "://")
		if !ok {
			name, addr = plaintext, e
		}
		name = strings.ToUpper(name)
		if !validListenerName(name) {
			return nil, fmt.Errorf("%s: %q: %q is not a listener name", p.key, e, name)
		}
		if err := checkHostPort(addr, listening); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", p.key, e, err)
		}
		for _, o := range out {
			if o.name == name {
				return nil, fmt.Errorf("%s: %q: listener %s is named twice", p.key, p.value, name)
			}
		}
		out = append(out, listener{name, addr})
	}
	return out, nil
}

// unknownListener refuses a listener name Sluice has no use for, naming it and the two it has.
func unknownListener(c *Config, p prop, l listener) error {
	for _, proto := range securityProtocols[1:] {
		if l.name == proto {
			return fmt.Errorf("%s: listener %s://%s: %s is not supported: Sluice speaks PLAINTEXT only", p.key, l.name, l.addr, proto)
		}
	}
	return fmt.Errorf("%s: listener %s://%s: unknown name (Sluice has %s for clients and %s, controller.listener.names, for the quorum)",
		p.key, l.name, l.addr, plaintext, c.controllerListenerName())
}

// controllerListenerName is controller.listener.names' name, CONTROLLER when unset.
func (c *Config) controllerListenerName() string {
	if c.ControllerListenerName == "" {
		return DefaultConfig().ControllerListenerName
	}
	return c.ControllerListenerName
}

// setListeners is listeners: PLAINTEXT is Listen, the controller listener ControllerListen. A
// listeners without PLAINTEXT leaves no TCP listener for clients (a controller-only node;
// a broker is refused that once the whole file is read).
func setListeners(c *Config, p prop) error {
	ls, err := parseListeners(p, true)
	if err != nil {
		return err
	}
	listen, ctrl := "", ""
	for _, l := range ls {
		switch l.name {
		case plaintext:
			listen = l.addr
		case c.controllerListenerName():
			ctrl = l.addr
		default:
			return unknownListener(c, p, l)
		}
	}
	c.Listen, c.ControllerListen = listen, ctrl
	return nil
}

// setAdvertisedListeners is advertised.listeners: the PLAINTEXT entry is AdvertisedListen;
// the controller's is AdvertisedControllerListen, which this node's voter entry may name instead
// of the CONTROLLER listener's bind address.
// An advertised address needs a host: clients connect to it.
func setAdvertisedListeners(c *Config, p prop) error {
	ls, err := parseListeners(p, false)
	if err != nil {
		return err
	}
	adv, advCtrl := "", ""
	for _, l := range ls {
		switch l.name {
		case plaintext:
			if host, _, _ := net.SplitHostPort(l.addr); host == "0.0.0.0" || host == "::" {
				return fmt.Errorf("%s: %s://%s: an advertised host must be one clients can connect to, not every interface", p.key, l.name, l.addr)
			}
			adv = l.addr
		case c.controllerListenerName():
			if host, _, _ := net.SplitHostPort(l.addr); host == "0.0.0.0" || host == "::" {
				return fmt.Errorf("%s: %s://%s: an advertised host must be one other nodes can connect to, not every interface", p.key, l.name, l.addr)
			}
			advCtrl = l.addr
		default:
			return unknownListener(c, p, l)
		}
	}
	c.AdvertisedListen, c.AdvertisedControllerListen = adv, advCtrl
	return nil
}

// checkProtocolMap is listener.security.protocol.map: NAME:PROTOCOL entries. Kafka's default
// maps SSL, SASL_PLAINTEXT and SASL_SSL to themselves, and its quick start's file says so, so
// entries for names Sluice does not listen on are accepted; the client and controller
// listeners must be PLAINTEXT.
func checkProtocolMap(c *Config, p prop) error {
	entries := splitList(p.value)
	if len(entries) == 0 {
		return fmt.Errorf("%s: %q: want NAME:PROTOCOL[,NAME:PROTOCOL]", p.key, p.value)
	}
	for _, e := range entries {
		name, proto, ok := strings.Cut(e, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || !validListenerName(name) {
			return fmt.Errorf("%s: %q: want NAME:PROTOCOL", p.key, e)
		}
		known := false
		for _, sp := range securityProtocols {
			known = known || proto == sp
		}
		if !known {
			return fmt.Errorf("%s: %q: %q is not a security protocol (%s)", p.key, e, proto, strings.Join(securityProtocols, ", "))
		}
		if (name == plaintext || name == c.controllerListenerName()) && proto != plaintext {
			return fmt.Errorf("%s: %q: %s is not supported: Sluice speaks PLAINTEXT only", p.key, e, proto)
		}
	}
	return nil
}

// splitHostPort is net.SplitHostPort with the port as a number (0 when it does not parse).
func splitHostPort(addr string) (host string, port int, err error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, _ = strconv.Atoi(portText)
	return host, port, nil
}
