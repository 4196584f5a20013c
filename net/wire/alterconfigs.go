package wire

// AlterConfigs (key 33) sets the dynamic configuration of topics (and
// brokers), for `sluice topic alter`.
//
// Behavior (Kafka's): the Configs of a resource REPLACE its whole set of
// dynamic overrides; a config left out returns to its default. A client that
// changes one setting therefore describes first and sends the merged set.
// (Kafka later added IncrementalAlterConfigs, key 44, reserved here.)
// ValidateOnly checks and changes nothing. Results are per resource, in
// request order; an unknown config name or a bad value gets
// ErrInvalidConfig and leaves that resource unchanged.

// AlterConfigsRequest replaces the dynamic configs of some resources.
type AlterConfigsRequest struct {
	Resources    []AlterConfigsResource
	ValidateOnly bool
}

// AlterConfigsResource is the new set of overrides for one resource.
type AlterConfigsResource struct {
	ResourceType ResourceType
	ResourceName string
	Configs      []ConfigEntry
}

const minAlterConfigsResource = sizeInt8 + sizeString + sizeArray

// Key returns AlterConfigs.
func (*AlterConfigsRequest) Key() APIKey { return AlterConfigs }

// AppendTo appends the body's encoding.
func (a *AlterConfigsRequest) AppendTo(dst []byte) []byte {
	dst = appendArray(dst, a.Resources)
	return appendBool(dst, a.ValidateOnly)
}

// ReadFrom decodes b into a (see Message).
func (a *AlterConfigsRequest) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.Resources = readSlice(&r, a.Resources, minAlterConfigsResource)
	for i := range a.Resources {
		a.Resources[i].readFrom(&r)
	}
	a.ValidateOnly = r.bool()
	return r.done()
}

func (c *AlterConfigsResource) appendTo(dst []byte) []byte {
	dst = appendInt8(dst, int8(c.ResourceType))
	dst = appendString(dst, c.ResourceName)
	return appendArray(dst, c.Configs)
}

func (c *AlterConfigsResource) readFrom(r *reader) {
	c.ResourceType = ResourceType(r.int8())
	c.ResourceName = r.stringReuse(c.ResourceName)
	c.Configs = readSlice(r, c.Configs, minConfigEntry)
	for i := range c.Configs {
		c.Configs[i].readFrom(r)
	}
}

// AlterConfigsResponse has one result per requested resource.
type AlterConfigsResponse struct {
	ThrottleMs int32
	Resources  []AlterConfigsResult
}

// AlterConfigsResult is the outcome for one resource.
type AlterConfigsResult struct {
	ErrorCode    ErrorCode
	ErrorMessage *string
	ResourceType ResourceType
	ResourceName string
}

const minAlterConfigsResult = sizeInt16 + sizeString + sizeInt8 + sizeString

// Key returns AlterConfigs.
func (*AlterConfigsResponse) Key() APIKey { return AlterConfigs }

// AppendTo appends the body's encoding.
func (a *AlterConfigsResponse) AppendTo(dst []byte) []byte {
	dst = appendInt32(dst, a.ThrottleMs)
	return appendArray(dst, a.Resources)
}

// ReadFrom decodes b into a (see Message).
func (a *AlterConfigsResponse) ReadFrom(b []byte) error {
	r := reader{b: b}
	a.ThrottleMs = r.int32()
	a.Resources = readSlice(&r, a.Resources, minAlterConfigsResult)
	for i := range a.Resources {
		a.Resources[i].readFrom(&r)
	}
	return r.done()
}

func (c *AlterConfigsResult) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, int16(c.ErrorCode))
	dst = appendErrorMessage(dst, c.ErrorMessage)
	dst = appendInt8(dst, int8(c.ResourceType))
	return appendString(dst, c.ResourceName)
}

func (c *AlterConfigsResult) readFrom(r *reader) {
	c.ErrorCode = ErrorCode(r.int16())
	c.ErrorMessage = r.nullableString()
	c.ResourceType = ResourceType(r.int8())
	c.ResourceName = r.stringReuse(c.ResourceName)
}
