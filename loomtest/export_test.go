package loomtest

// Seams for the external tests: the record paths without the flags.
var (
	CheckGolden  = checkGolden
	OpenCassette = openCassette
)
