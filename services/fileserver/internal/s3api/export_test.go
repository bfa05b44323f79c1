package s3api

// RequestID is requestID, for the external tests.
var RequestID = requestID
