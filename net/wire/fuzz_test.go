package wire

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// The fuzz targets check that no input panics or allocates without bound,
// and that whatever decodes re-encodes to something that decodes to the
// same value (and re-encodes to the same bytes).

func isRequest(m Message) bool {
	r, ok := m.(Request)
	if !ok {
		return false
	}
	req, _ := NewRequest(r.Key(), 0)
	return reflect.TypeOf(req) == reflect.TypeOf(m)
}

// FuzzFrameHeader covers the size check and both headers.
func FuzzFrameHeader(f *testing.F) {
	f.Add(AppendRequestFrame(nil, &RequestHeader{APIKey: Produce, CorrelationID: 1, ClientID: "c"}, &ProduceRequest{}))
	f.Add(AppendResponseFrame(nil, 9, &APIVersionsResponse{}))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < FrameSizeLen {
			return
		}
		n, err := ReadFrameSize([4]byte(data), MaxRequestBytes)
		if err == nil && (n < MinRequestHeaderLen || n > MaxRequestBytes) {
			t.Fatalf("ReadFrameSize accepted %d", n)
		}
		if n, err := ReadResponseFrameSize([4]byte(data), 1<<20); err == nil && (n < ResponseHeaderLen || n > 1<<20) {
			t.Fatalf("ReadResponseFrameSize accepted %d", n)
		}
		frame := data[FrameSizeLen:]

		var h RequestHeader
		if body, err := h.ReadFrom(frame); err == nil {
			enc := append(h.AppendTo(nil), body...)
			var h2 RequestHeader
			body2, err := h2.ReadFrom(enc)
			if err != nil || h2 != h || !bytes.Equal(body2, body) {
				t.Fatalf("request header round trip: %+v vs %+v, %v", h2, h, err)
			}
		}
		var rh ResponseHeader
		if body, err := rh.ReadFrom(frame); err == nil {
			if len(body) != len(frame)-ResponseHeaderLen {
				t.Fatal("response header consumed the wrong length")
			}
		}
	})
}

// FuzzRequest decodes a whole request frame (after the size field), keyed by
// the api key in its header, as the broker does.
func FuzzRequest(f *testing.F) {
	for _, s := range samples() {
		if isRequest(s.msg) {
			h := RequestHeader{APIKey: s.msg.(Request).Key(), APIVersion: VersionOf(s.msg.(Request)), CorrelationID: 1, ClientID: "seed"}
			f.Add(AppendRequestFrame(nil, &h, s.msg)[FrameSizeLen:])
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var h RequestHeader
		body, err := h.ReadFrom(frame)
		if err != nil {
			return
		}
		req, err := NewRequest(h.APIKey, h.APIVersion)
		if err != nil {
			return
		}
		if req.ReadFrom(body) != nil {
			return
		}
		enc := AppendRequestFrame(nil, &h, req)
		if size := binary.BigEndian.Uint32(enc); int(size) != len(enc)-FrameSizeLen {
			t.Fatalf("frame size %d for %d bytes", size, len(enc)-FrameSizeLen)
		}
		var h2 RequestHeader
		body2, err := h2.ReadFrom(enc[FrameSizeLen:])
		if err != nil || h2 != h {
			t.Fatalf("header: %+v vs %+v, %v", h2, h, err)
		}
		req2, _ := NewRequest(h2.APIKey, h2.APIVersion)
		if err := req2.ReadFrom(body2); err != nil {
			t.Fatalf("%v: re-encoded request does not decode: %v", h.APIKey, err)
		}
		if !reflect.DeepEqual(req, req2) {
			t.Fatalf("%v: round trip differs\n%+v\n%+v", h.APIKey, req, req2)
		}
		if enc2 := AppendRequestFrame(nil, &h2, req2); !bytes.Equal(enc, enc2) {
			t.Fatalf("%v: re-encoding is not stable", h.APIKey)
		}
	})
}

// FuzzResponse decodes a response body; the first two bytes pick the api
// key and the third the version, as the request a client sent would.
func FuzzResponse(f *testing.F) {
	for _, s := range samples() {
		if !isRequest(s.msg) {
			k := s.msg.(Response).Key()
			var v int16
			if f := reflect.ValueOf(s.msg).Elem().FieldByName("Version"); f.IsValid() {
				v = int16(f.Int())
			}
			seed := append(binary.BigEndian.AppendUint16(nil, uint16(k)), byte(v))
			f.Add(append(seed, s.msg.AppendTo(nil)...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		k := APIKey(binary.BigEndian.Uint16(data))
		v := int16(data[2])
		resp, err := NewResponse(k, v)
		if err != nil || resp.ReadFrom(data[3:]) != nil {
			return
		}
		enc := resp.AppendTo(nil)
		resp2, _ := NewResponse(k, v)
		if err := resp2.ReadFrom(enc); err != nil {
			t.Fatalf("%v: re-encoded response does not decode: %v", k, err)
		}
		if !reflect.DeepEqual(resp, resp2) {
			t.Fatalf("%v: round trip differs\n%+v\n%+v", k, resp, resp2)
		}
		if !bytes.Equal(enc, resp2.AppendTo(nil)) {
			t.Fatalf("%v: re-encoding is not stable", k)
		}
		// The segmented Fetch encoder agrees with AppendTo on every
		// decodable response.
		if fr, ok := resp.(*FetchResponse); ok {
			blobs, lens := recordsOf(fr)
			buf, cuts, err := fr.AppendSegments(nil, lens, nil)
			if err != nil || !bytes.Equal(splice(buf, 0, cuts, blobs), enc) {
				t.Fatalf("fetch segments differ: %v", err)
			}
		}
		// So does the FetchShared frame encoder (records sent apart, spans after them), and
		// its size field counts the records it leaves out.
		if fr, ok := resp.(*FetchSharedResponse); ok {
			blobs, lens := recordsOf(&fr.FetchResponse)
			frame, cuts, err := AppendFetchSharedResponseFrame(nil, 7, &fr.FetchResponse, lens, nil, fr.Spans)
			if err != nil {
				t.Fatalf("FetchShared frame: %v", err)
			}
			full := splice(frame, 0, cuts, blobs)
			if !bytes.Equal(full, AppendResponseFrame(nil, 7, resp)) {
				t.Fatal("spliced FetchShared frame differs from AppendResponseFrame")
			}
			if size := binary.BigEndian.Uint32(full); int(size) != len(full)-FrameSizeLen {
				t.Fatalf("FetchShared frame size %d for %d bytes", size, len(full)-FrameSizeLen)
			}
		}
	})
}
