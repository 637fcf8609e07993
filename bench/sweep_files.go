package bench

import "os"

// WriteSweepFiles writes rows to the file csvPath as CSV
// ([WriteSweepCSV]) and their plot to the file svgPath ([SweepSVG]),
// each where its path is not "", marked simulated or not. A file that
// cannot be created or written is the *os.PathError.
func WriteSweepFiles(rows []SweepRow, simulated bool, csvPath, svgPath string) error {
	if csvPath != "" {
		f, err := os.Create(csvPath)
		if err != nil {
			return err
		}
		if err := WriteSweepCSV(f, rows, simulated); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if svgPath != "" {
		return os.WriteFile(svgPath, []byte(SweepSVG(rows, simulated)), 0o644)
	}
	return nil
}
