// Command tool may import any role.
package main

import (
	"fmt"

	"example.com/fixture/services/alpha"
	"example.com/fixture/services/beta"
)

func main() { fmt.Println(alpha.Port, beta.Port) }
