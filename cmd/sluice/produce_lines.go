package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/client"
)

// lineFormat is how produce reads a line into a record: kafka-console-producer's
// LineMessageReader, whose --property names it takes. With parseHeaders a line is
// "h1:v1,h2:v2<TAB>key<TAB>value" (headers, then the key if parseKey, then the value).
type lineFormat struct {
	parseKey      bool
	keySep        string
	parseHeaders  bool
	headersDelim  string
	headersSep    string
	headerKeySep  string
	staticHeaders []client.Header // --header, on every record
}

// lineFormatProperties are the --property names produce takes.
var lineFormatProperties = []string{"parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator", "headers.key.separator"}

// resolve checks and combines the options given as flags into o.reader and o.props.
func (o *produceOptions) resolve(fs *pflag.FlagSet) error {
	lf := lineFormat{keySep: "\t", headersDelim: "\t", headersSep: ",", headerKeySep: ":"}
	if o.keySeparator != "" {
		lf.parseKey, lf.keySep = true, o.keySeparator
	}
	seen := map[string]bool{}
	for _, kv := range o.lineProps {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--property %q: want key=value", kv)
		}
		if seen[k] {
			return fmt.Errorf("--property %s: given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "parse.key":
			lf.parseKey, err = parseBool(v)
		case "key.separator":
			if o.keySeparator != "" {
				return errors.New("--key-separator and --property key.separator both set the key separator: give one")
			}
			lf.keySep = v
		case "parse.headers":
			lf.parseHeaders, err = parseBool(v)
		case "headers.delimiter":
			lf.headersDelim = v
		case "headers.separator":
			lf.headersSep = v
		case "headers.key.separator":
			lf.headerKeySep = v
		default:
			msg := fmt.Sprintf("--property %s: unknown property (produce takes %s)", k, strings.Join(lineFormatProperties, ", "))
			if s := suggest(k, lineFormatProperties); len(s) > 0 {
				msg = fmt.Sprintf("--property %s: unknown property; did you mean %s?", k, strings.Join(s, " or "))
			}
			if s := suggest(k, producerProperties.names()); len(s) > 0 && s[0] == k {
				msg += " (" + k + " is a producer property: give it with --producer-property)"
			}
			return errors.New(msg)
		}
		if err != nil {
			return fmt.Errorf("--property %s=%s: %w", k, v, err)
		}
	}
	for name, v := range map[string]string{"key.separator": lf.keySep, "headers.delimiter": lf.headersDelim, "headers.separator": lf.headersSep, "headers.key.separator": lf.headerKeySep} {
		if v == "" {
			return fmt.Errorf("--property %s: the separator cannot be empty", name)
		}
	}
	for _, kv := range o.headers {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--header %q: want key=value", kv)
		}
		lf.staticHeaders = append(lf.staticHeaders, client.Header{Key: k, Value: []byte(v)})
	}
	if o.partition < -1 {
		return fmt.Errorf("--partition %d: want a partition number (from 0), or -1 for the partitioner's choice", o.partition)
	}
	o.reader = lf
	props, err := collectProperties("--producer-property", o.clientProps, fs, produceFlagProperties, map[string]string{
		"acks": o.acks, "compression.type": o.compression, "linger.ms": fmt.Sprint(o.lingerMs),
		"batch.size": fmt.Sprint(o.batchSize), "max.block.ms": fmt.Sprint(o.maxBlockMs),
		"bootstrap.servers": o.broker,
	})
	if err != nil {
		return err
	}
	o.props = props
	return nil
}

// record reads line into a record's key, value and headers. They alias line: Send copies
// them.
func (f *lineFormat) record(line []byte) (client.Record, error) {
	var rec client.Record
	if f.parseHeaders {
		hs, rest, ok := bytes.Cut(line, []byte(f.headersDelim))
		if !ok {
			return rec, fmt.Errorf("no headers delimiter %q (parse.headers=true: headers, then the delimiter)", f.headersDelim)
		}
		line = rest
		if len(hs) > 0 {
			for _, h := range bytes.Split(hs, []byte(f.headersSep)) {
				k, v, ok := bytes.Cut(h, []byte(f.headerKeySep))
				if !ok || len(k) == 0 {
					return rec, fmt.Errorf("header %q: want key%svalue", h, f.headerKeySep)
				}
				rec.Headers = append(rec.Headers, client.Header{Key: string(k), Value: v})
			}
		}
	}
	rec.Headers = append(rec.Headers, f.staticHeaders...)
	rec.Value = line
	if f.parseKey {
		k, v, ok := bytes.Cut(line, []byte(f.keySep))
		if !ok {
			return rec, fmt.Errorf("no key separator %q", f.keySep)
		}
		rec.Key, rec.Value = k, v
	}
	return rec, nil
}
