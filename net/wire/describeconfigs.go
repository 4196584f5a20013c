package wire

// DescribeConfigs (key 32) reads the effective configuration of topics (and
// brokers), for `sluice topic describe`.
//
// Behavior: results are per resource, in request order. ConfigNames nil asks
// for every config of the resource; a non-nil list asks for those names only
// (an unknown name is left out, not an error). Sensitive values are returned
// as null.

// DescribeConfigsRequest asks for the configs of some resources.
type DescribeConfigsRequest struct {
	Resources []DescribeConfigsResource
}

// DescribeConfigsResource names one resource and, optionally, the configs
// wanted.
type DescribeConfigsResource struct {
	ResourceType ResourceType
	ResourceName string
	ConfigNames  []string // nil = all configs (encoded as a null array)
}

const minDescribeConfigsResource = sizeInt8 + sizeString + sizeArray

// Key returns DescribeConfigs.
func (*DescribeConfigsRequest) Key() APIKey { return DescribeConfigs }

// AppendTo appends the body's encoding.
func (d *DescribeConfigsRequest) AppendTo(dst []byte) []byte {
	return appendArray(dst, d.Resources)
}

// ReadFrom decodes b into d (see Message).
func (d *DescribeConfigsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.Resources = readSlice(&r, d.Resources, minDescribeConfigsResource)
	for i := range d.Resources {
		d.Resources[i].readFrom(&r)
	}
	return r.done()
}

func (c *DescribeConfigsResource) appendTo(dst []byte) []byte {
	dst = appendInt8(dst, int8(c.ResourceType))
	dst = appendString(dst, c.ResourceName)
	return appendNullableStrings(dst, c.ConfigNames)
}

func (c *DescribeConfigsResource) readFrom(r *reader) {
	c.ResourceType = ResourceType(r.int8())
	c.ResourceName = r.stringReuse(c.ResourceName)
	c.ConfigNames = r.nullableStrings(c.ConfigNames)
}

// DescribeConfigsResponse has one result per requested resource.
type DescribeConfigsResponse struct {
	ThrottleMs int32
	Resources  []DescribeConfigsResult
}

// DescribeConfigsResult is one resource's configs, or why they could not be
// read.
type DescribeConfigsResult struct {
	ErrorCode    ErrorCode
	ErrorMessage *string
	ResourceType ResourceType
	ResourceName string
	Configs      []DescribeConfigsEntry
}

// DescribeConfigsEntry is one config's effective value and where it comes
// from.
type DescribeConfigsEntry struct {
	Name        string
	Value       *string // nil if unset or sensitive
	ReadOnly    bool    // cannot be changed with AlterConfigs
	Source      ConfigSource
	IsSensitive bool
}

const (
	minDescribeConfigsResult = sizeInt16 + sizeString + sizeInt8 + sizeString + sizeArray
	minDescribeConfigsEntry  = sizeString*2 + sizeBool + sizeInt8 + sizeBool
)

// Key returns DescribeConfigs.
func (*DescribeConfigsResponse) Key() APIKey { return DescribeConfigs }

// AppendTo appends the body's encoding.
func (d *DescribeConfigsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, d.ThrottleMs)
	return appendArray(dst, d.Resources)
}

// ReadFrom decodes b into d (see Message).
func (d *DescribeConfigsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	d.ThrottleMs = r.int32()
	d.Resources = readSlice(&r, d.Resources, minDescribeConfigsResult)
	for i := range d.Resources {
		d.Resources[i].readFrom(&r)
	}
	return r.done()
}

func (c *DescribeConfigsResult) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(c.ErrorCode))
	dst = appendErrorMessage(dst, c.ErrorMessage)
	dst = appendInt8(dst, int8(c.ResourceType))
	dst = appendString(dst, c.ResourceName)
	return appendArray(dst, c.Configs)
}

func (c *DescribeConfigsResult) readFrom(r *reader) {
	c.ErrorCode = ErrorCode(r.int16())
	c.ErrorMessage = r.nullableString()
	c.ResourceType = ResourceType(r.int8())
	c.ResourceName = r.stringReuse(c.ResourceName)
	c.Configs = readSlice(r, c.Configs, minDescribeConfigsEntry)
	for i := range c.Configs {
		c.Configs[i].readFrom(r)
	}
}

func (e *DescribeConfigsEntry) appendTo(dst []byte) []byte {
	dst = appendString(dst, e.Name)
	dst = appendNullableString(dst, e.Value)
	dst = appendBool(dst, e.ReadOnly)
	dst = appendInt8(dst, int8(e.Source))
	return appendBool(dst, e.IsSensitive)
}

func (e *DescribeConfigsEntry) readFrom(r *reader) {
	e.Name = r.stringReuse(e.Name)
	e.Value = r.nullableString()
	e.ReadOnly = r.bool()
	e.Source = ConfigSource(r.int8())
	e.IsSensitive = r.bool()
}
