package wire

// ApiVersions (key 18) lets a client learn, per api key, the versions the
// broker implements, so both sides can use the highest version they share.
// A client sends it first on every connection.
//
// Behavior: a broker answers ApiVersions of any version, even one it does
// not implement: it then replies with a version 0 body carrying
// ErrUnsupportedVersion and its ranges, so a newer client can fall back.
// That is why this body must stay decodable by every later version.

// APIVersionsRequest has an empty body in version 0.
type APIVersionsRequest struct{}

// Key returns APIVersions.
func (*APIVersionsRequest) Key() APIKey { return APIVersions }

// AppendTo appends nothing: the version 0 body is empty.
func (*APIVersionsRequest) AppendTo(dst []byte) []byte { return dst }

// ReadFrom accepts only an empty body.
func (*APIVersionsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	return r.done()
}

// APIVersionsResponse lists the broker's version range per api key.
type APIVersionsResponse struct {
	ErrorCode  ErrorCode
	APIKeys    []APIVersionRange
	ThrottleMs int32
}

// APIVersionRange is the inclusive range of versions of one api key.
type APIVersionRange struct {
	APIKey     APIKey
	MinVersion int16
	MaxVersion int16
}

const minAPIVersionRange = sizeInt16 * 3

// Key returns APIVersions.
func (*APIVersionsResponse) Key() APIKey { return APIVersions }

// AppendTo appends the body's encoding.
func (v *APIVersionsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(v.ErrorCode))
	dst = appendArray(dst, v.APIKeys)
	return appendInt32(dst, v.ThrottleMs)
}

// ReadFrom decodes b into v (see Message).
func (v *APIVersionsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	v.ErrorCode = ErrorCode(r.int16())
	v.APIKeys = readSlice(&r, v.APIKeys, minAPIVersionRange)
	for i := range v.APIKeys {
		v.APIKeys[i].readFrom(&r)
	}
	v.ThrottleMs = r.int32()
	return r.done()
}

// Lookup returns the range for key k, if the broker listed it.
func (v *APIVersionsResponse) Lookup(k APIKey) (APIVersionRange, bool) {
	for _, a := range v.APIKeys {
		if a.APIKey == k {
			return a, true
		}
	}
	return APIVersionRange{}, false
}

func (a *APIVersionRange) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(a.APIKey))
	dst = appendInt16(dst, a.MinVersion)
	return appendInt16(dst, a.MaxVersion)
}

func (a *APIVersionRange) readFrom(r *reader) {
	a.APIKey = APIKey(r.int16())
	a.MinVersion = r.int16()
	a.MaxVersion = r.int16()
}
