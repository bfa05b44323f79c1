package s3api

import "github.com/minkhq/mink/pkg/apierr"

// RequestID is the S3 API's request id, for the external tests.
var RequestID = apierr.RequestID
