package registry

import "strconv"

// WaitingForID is how many callers wait for the request of schema id now.
func WaitingForID(c *Client, id int) int { return c.flights.Waiting("id/" + strconv.Itoa(id)) }
