package egresstest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// Resolver returns a resolver that knows exactly names: each resolves to
// its address (A for an IPv4 address, AAAA for an IPv6 one, an empty
// answer for the other type) and every other name does not exist. Names
// match case-insensitively, with or without a trailing dot.
//
// Its DNS server lives in memory, one per lookup over a net.Pipe, so no
// port is opened and parallel tests cannot answer each other's queries.
// Because a pipe is not a net.PacketConn, the Go resolver speaks DNS over
// it with TCP framing (a two-byte length before each message).
//
// The Go resolver still honours /etc/hosts and /etc/nsswitch.conf: on a
// host whose nsswitch.conf names no dns source for hosts, it never asks.
func Resolver(names map[string]netip.Addr) *net.Resolver {
	table := make(map[string]netip.Addr, len(names))
	for name, addr := range names {
		table[canonicalName(name)] = addr.Unmap()
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go serveDNS(server, table)
			return client, nil
		},
	}
}

func canonicalName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// serveDNS answers queries on one stream until the resolver closes it
// (it does after each exchange, and when its context ends).
func serveDNS(conn net.Conn, table map[string]netip.Addr) {
	defer conn.Close()
	for {
		var size [2]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(conn, query); err != nil {
			return
		}
		reply, err := answer(query, table)
		if err != nil {
			return // not even a header to answer to: hang up
		}
		// One write for length and message: the pipe hands each write to
		// the reader whole, and the resolver reads the length first.
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reply)), uint16(len(reply)))
		if _, err := conn.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

// answer builds the reply to one query.
func answer(query []byte, table map[string]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	qh, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	questions, err := p.AllQuestions()
	// Authoritative and RecursionAvailable: without both, the Go resolver
	// takes an empty answer for a lame referral and tries elsewhere
	// instead of concluding the name has no address of that type.
	h := dnsmessage.Header{
		ID:                 qh.ID,
		Response:           true,
		OpCode:             qh.OpCode,
		Authoritative:      true,
		RecursionDesired:   qh.RecursionDesired,
		RecursionAvailable: true,
	}
	if err != nil || len(questions) != 1 {
		h.RCode = dnsmessage.RCodeFormatError
		b := dnsmessage.NewBuilder(nil, h)
		return b.Finish()
	}
	q := questions[0]
	addr, known := table[canonicalName(q.Name.String())]
	if !known {
		h.RCode = dnsmessage.RCodeNameError
	}

	b := dnsmessage.NewBuilder(nil, h)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
	switch {
	case !known || q.Class != dnsmessage.ClassINET:
	case q.Type == dnsmessage.TypeA && addr.Is4():
		err = b.AResource(rh, dnsmessage.AResource{A: addr.As4()})
	case q.Type == dnsmessage.TypeAAAA && addr.Is6():
		err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: addr.As16()})
	}
	if err != nil {
		return nil, err
	}
	return b.Finish()
}
